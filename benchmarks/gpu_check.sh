#!/usr/bin/env bash
# The CUDA check (benchmarks/gpu_check.py) on a machine with CUDA and its own torch, from nothing else:
# this tree is installed without its dependencies and without an index, so nothing is fetched and
# the machine's torch stays.   Usage: benchmarks/gpu_check.sh OUT_DIR [--dry] [--skip-conformance]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: benchmarks/gpu_check.sh OUT_DIR [--dry] [--skip-conformance]}
shift
python3 -m pip install --quiet --no-deps --no-build-isolation --no-index -e . ./contrib/specmix-ngram ||
  { echo "gpu_check: installing this tree failed; it needs setuptools>=77 in this python" >&2; exit 1; }
PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --out "$out" "$@"
