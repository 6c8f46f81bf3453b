import json

import attrs
import pytest

from specmix import ConfigurationError
from specmix.bench import report_journal
from specmix.cli import main
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
    assert "Partial: 2 of the run's 3 prompts" in journal.with_suffix(".md").read_text()
    assert json.loads(journal.read_text())["of"] == 3
    assert journal.with_suffix(".png").exists()


def test_report_only_from_the_command_line(journal, capsys):
    assert main(["bench", "--out", str(journal), "--report-only"]) == 0
    assert "2 of 3 prompts" in capsys.readouterr().err


def test_report_only_without_a_journal_names_the_command_that_writes_one(tmp_path):
    with pytest.raises(ConfigurationError, match="specmix bench --out"):
        report_journal(tmp_path / "bench.json")


def test_bench_without_prompts_is_an_error(capsys):
    assert main(["bench", "--methods", "hf"]) == 2
    assert "--prompts is required" in capsys.readouterr().err
