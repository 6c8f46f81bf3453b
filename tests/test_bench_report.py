import json
import math
import statistics

import attrs
import pytest

from specmix import ConfigurationError
from specmix.bench.report import variant_ratios, variant_table
from specmix.bench.runner import report_journal
from specmix.cli.main import main
from specmix.settings import DecodeSettings


@pytest.fixture
def journal(tmp_path):
    """A run over three prompts, interrupted after two."""
    prompts = tmp_path / "questions.jsonl"
    prompts.write_text("".join(json.dumps({"question_id": i, "category": c, "turns": [f"q{i}"]}) + "\n"
                               for i, c in enumerate(["math", "math", "coding"])))
    header = {"methods": ["hf", "vanilla"], "prompts": str(prompts), "limit": None, "per_category": None,
              "model": "default", "settings": attrs.asdict(DecodeSettings(max_new_tokens=4))}
    hf = {"tokens": [1, 2, 3, 4], "seconds": 2.0, "steps": None}
    finished = [
        {"index": 0, "runs": {"hf": hf, "vanilla": {"tokens": [1, 2, 3, 4], "seconds": 1.0, "steps": 2}}},
        {"index": 1, "runs": {"hf": hf, "vanilla": {"tokens": [1, 2, 3, 5], "seconds": 1.0, "steps": 4}}},
    ]
    out = tmp_path / "bench.json"
    out.with_suffix(".runs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [header, *finished]))
    return out


def test_a_partial_report_covers_the_finished_prompts_and_says_so(journal):
    report = report_journal(journal)
    assert (report["prompts"], report["of"]) == (2, 3)
    vanilla = report["methods"]["vanilla"]
    assert vanilla["speedup_vs_hf"] == pytest.approx(2.0)
    assert vanilla["tau"] == pytest.approx(8 / 6)
    assert vanilla["identical_rate"] == 0.5
    assert list(vanilla["by_category"]) == ["math"]  # no coding prompt has finished
    table = journal.with_suffix(".md").read_text()
    assert "Partial: 2 of the run's 3 prompts" in table
    assert "| math | 1.00x (–; 1.00) | 2.00x (1.33; 0.50) |" in table
    assert json.loads(journal.read_text())["of"] == 3
    assert journal.with_suffix(".png").exists()
    assert "accepted_at_least" not in vanilla  # these runs recorded no per-step counts


def test_per_step_counts_give_acceptance_by_depth_and_the_drafting_share(journal):
    path = journal.with_suffix(".runs.jsonl")
    header, *finished = [json.loads(line) for line in path.read_text().splitlines()]
    profiles = [{"accepted": [3, 0], "verified": [8, 8], "draft_s": 0.25},
                {"accepted": [1, 0, 0, 1], "verified": [8, 2, 2, 4], "draft_s": 0.5}]
    for line, profile in zip(finished, profiles):
        line["runs"]["vanilla"].update(profile)
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *finished]))

    vanilla = report_journal(journal)["methods"]["vanilla"]
    assert vanilla["accepted_at_least"] == pytest.approx([3 / 6, 1 / 6, 1 / 6])
    assert vanilla["verified_per_step"] == pytest.approx(32 / 6)
    assert vanilla["draft_share"] == pytest.approx(0.75 / 2.0)
    table = journal.with_suffix(".md").read_text()
    assert "| vanilla | 5.3 | 38% | 0.500 | 0.167 | 0.167 |" in table
    assert "over the" not in table


def test_a_mix_reports_each_drafters_share_and_what_a_memory_held(journal):
    path = journal.with_suffix(".runs.jsonl")
    header, *finished = [json.loads(line) for line in path.read_text().splitlines()]
    for line, held in zip(finished, [0, 300]):
        line["runs"]["vanilla"].update({"accepted": [1, 1], "verified": [4, 4], "draft_s": 0.1,
                                        "accepted_from": {"ngram": 1, "ptd": 1},
                                        "drafted": {"ngram": 2, "ptd": 1},  # an earlier version's field: ignored
                                        "carried": {"ngram": {"outputs": held // 300, "tokens": held}}})
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *finished]))

    vanilla = report_journal(journal)["methods"]["vanilla"]
    assert vanilla["accepted_from_share"] == {"ngram": 0.5, "ptd": 0.5}
    assert vanilla["carried"] == {"ngram": {"outputs": [0, 1], "tokens": [0, 300]}}
    table = journal.with_suffix(".md").read_text()
    assert "drafted_share" not in vanilla
    assert "- vanilla: ngram 50%, ptd 50%\n" in table
    assert "- vanilla, ngram: outputs 0/0/1, tokens 0/150/300" in table


def test_acceptance_by_depth_covers_only_the_prompts_that_recorded_steps(journal):
    path = journal.with_suffix(".runs.jsonl")
    header, first, second = [json.loads(line) for line in path.read_text().splitlines()]
    second["runs"]["vanilla"].update({"accepted": [2, 1, 0, 0], "verified": [4, 4, 4, 4], "draft_s": 0.5})
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, first, second]))

    vanilla = report_journal(journal)["methods"]["vanilla"]
    assert vanilla["profiled_runs"] == 1
    assert vanilla["accepted_at_least"] == pytest.approx([0.5, 0.25])
    assert vanilla["draft_share"] == pytest.approx(0.5)
    assert "over the 1 prompts whose steps were recorded" in journal.with_suffix(".md").read_text()


def test_report_only_from_the_command_line(journal, capsys):
    assert main(["bench", "--out", str(journal), "--report-only"]) == 0
    assert "2 of 3 prompts" in capsys.readouterr().err


def test_report_only_without_a_journal_names_the_command_that_writes_one(tmp_path):
    with pytest.raises(ConfigurationError, match="specmix bench --out"):
        report_journal(tmp_path / "bench.json")


def test_bench_without_prompts_is_an_error(capsys):
    assert main(["bench", "--methods", "hf"]) == 2
    assert "--prompts is required" in capsys.readouterr().err


def test_a_variant_is_compared_with_its_method_prompt_by_prompt():
    runs = [{"m": {"tokens": 10, "seconds": 1.0}, "m[x=1]": {"tokens": 10, "seconds": s}, "other[y=2]": {}}
            for s in (0.5, 1.0, 2.0)]
    variants = variant_ratios(runs, ["hf", "m", "m[x=1]", "other[y=2]"])
    assert list(variants) == ["m[x=1]"]  # a variant whose method did not run is not compared
    row = variants["m[x=1]"]
    ratios = [2.0, 1.0, 0.5]  # per prompt, not the ratio of the totals (10 / 3.5 tokens per second)
    assert (row["of"], row["prompts"]) == ("m", 3)
    assert row["mean"] == pytest.approx(sum(ratios) / 3)
    assert row["two_se"] == pytest.approx(2 * statistics.stdev(ratios) / math.sqrt(3))
    assert variant_table(variants)[2] == f"| `m[x=1]` | m | {row['mean']:.3f} ± {row['two_se']:.3f} | 3 |"


def test_the_report_lists_variants_beside_their_methods(journal):
    header, *lines = journal.with_suffix(".runs.jsonl").read_text().splitlines()
    header_fields = json.loads(header)
    header_fields["methods"].append("vanilla[selector.budget=2]")
    rewritten = [json.loads(line) for line in lines]
    for line in rewritten:
        line["runs"]["vanilla[selector.budget=2]"] = {**line["runs"]["vanilla"], "seconds": 2.0}
    journal.with_suffix(".runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header_fields, *rewritten]))
    report = report_journal(journal)
    assert report["variants"]["vanilla[selector.budget=2]"]["mean"] == pytest.approx(0.5)
    assert "| `vanilla[selector.budget=2]` | vanilla | 0.500 ± 0.000 | 2 |" in journal.with_suffix(".md").read_text()
