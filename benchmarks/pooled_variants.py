"""Variants against their methods over the prompts of several bench reports together.

Each report's ``variants`` table compares a method run with options changed (``ngram[drafter.memory=null]``) against
the method as it is, prompt by prompt. This pools the prompts of several reports that ran the same methods:

    python benchmarks/pooled_variants.py benchmarks/results/knobs-mt-bench-16-128.json \\
        benchmarks/results/knobs-grounded-12-128.json
"""

import json
import sys

from specmix.bench.report import variant_ratios, variant_table


def main(paths: list[str]) -> None:
    reports = [json.load(open(path)) for path in paths]
    methods = list(reports[0]["methods"])
    if any(list(report["methods"]) != methods for report in reports):
        sys.exit("the reports ran different methods; pool only reports of the same run's methods")
    runs = [run for report in reports for run in report["runs"]]
    print("\n".join(variant_table(variant_ratios(runs, methods))))


if __name__ == "__main__":
    main(sys.argv[1:])
