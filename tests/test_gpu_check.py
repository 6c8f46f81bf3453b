"""The GPU check's dry run: the same code on tiny models and the CPU, so that the script cannot rot."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "gpu_check.py"


def test_the_gpu_check_runs_dry_and_reports_every_measurement(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    assert gpu_check.main(["--dry", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["dry"] and report["conformance"] and all(run["passed"] for run in report["conformance"])
    assert "passed" in report["conformance"][0]["summary"]
    assert set(report["shapes"]) == set(gpu_check.DRY_SHAPES)
    for shape in report["shapes"].values():
        assert shape["vanilla_identical"] and all(row["identical"] for row in shape["efficiency"])
        assert [round(row["tau"]) for row in shape["efficiency"]] == [2, 4, 8]
        assert [row["n"] for row in shape["verifier_overhead"]] == [1, 16]
        assert len(shape["cost_curve"]["sizes"]) == len(shape["cost_curve"]["seconds"]) == 4
    table = (tmp_path / "gpu-check.md").read_text()
    assert "| oracle τ | speedup vs hf |" in table and "| N | raw forward (ms) |" in table
