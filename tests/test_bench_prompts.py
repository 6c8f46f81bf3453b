import json

import pytest

from specmix import ConfigurationError
from specmix.bench.prompts import load_prompts


@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    rows = [{"question_id": i, "category": category, "turns": [f"question {i}", "follow-up"]}
            for i, category in enumerate(["writing"] * 3 + ["math"] * 3 + ["coding"])]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return str(path)


def test_per_category_keeps_the_first_prompts_of_every_category_in_file_order(questions):
    picked = load_prompts(questions, per_category=2)
    assert [(p.id, p.category) for p in picked] == [("0", "writing"), ("1", "writing"), ("3", "math"), ("4", "math"),
                                                    ("6", "coding")]
    assert picked[0].text == "question 0"  # the first turn
    assert [p.id for p in load_prompts(questions, limit=3, per_category=2)] == ["0", "1", "3"]


def test_a_missing_prompt_file_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="humaneval"):
        load_prompts(str(tmp_path / "nope.jsonl"))
