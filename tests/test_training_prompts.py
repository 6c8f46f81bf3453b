import ast
import json

import pytest

from specmix.errors import ConfigurationError
from specmix.plugins.trained.prompts import COMPLETION_TEMPLATES, TEMPLATES, slug, stored_prompts, topics, training_prompts


def test_prompts_are_distinct_and_reproducible():
    prompts = training_prompts(10_000, seed=3)
    assert len(prompts) == len(set(prompts)) == len(topics()) * len(TEMPLATES)
    assert training_prompts(50, seed=3) == prompts[:50]
    assert training_prompts(50, seed=4) != prompts[:50]


def test_a_prompt_sharing_six_words_with_a_benchmark_is_dropped(tmp_path):
    benchmark = tmp_path / "bench.jsonl"
    benchmark.write_text(json.dumps({"question_id": 1, "category": "x",
                                     "turns": ["Tell me: give five interesting facts about bicycles, please."]}))
    kept = training_prompts(10_000, exclude=[benchmark])
    assert "Give five interesting facts about bicycles." not in kept
    assert "Give five interesting facts about glaciers." in kept
    assert "Explain bicycles to a curious twelve-year-old." in kept
    assert len(kept) == len(topics()) * len(TEMPLATES) - 1


def test_completion_prompts_are_python_stubs_named_after_their_topic():
    prompts = training_prompts(10_000, seed=0, templates=COMPLETION_TEMPLATES)
    assert len(prompts) == len(set(prompts)) == len(topics()) * len(COMPLETION_TEMPLATES)
    for prompt in prompts:
        function = next(node for node in ast.parse(prompt).body if isinstance(node, ast.FunctionDef))
        assert ast.get_docstring(function) and ">>> " + function.name + "(" in prompt
    assert slug("the printing press") == "printing_press" and slug("a time traveller's mistake") == "time_traveller_s_mistake"
    assert slug("JSON") == "json" and slug("maps and cartography") == "maps_and_cartography"


def test_a_stored_prompt_set_is_read_back_cut_to_count_and_grown_on_request(tmp_path):
    path = tmp_path / "prompts.json"
    first = stored_prompts(path, 5, seed=1, exclude=[])
    assert stored_prompts(path, 3, seed=1, exclude=[]) == first[:3]
    assert stored_prompts(path, 8, seed=1, exclude=[]) == training_prompts(8, seed=1)
    assert len(json.loads(path.read_text())) == 8
    path.write_text(json.dumps(first[:4] + ["kept as stored"]))
    assert stored_prompts(path, 5, seed=1, exclude=[])[-1] == "kept as stored"
    with pytest.raises(ConfigurationError, match="do not begin with"):
        stored_prompts(path, 8, seed=1, exclude=[])
    assert json.loads(path.read_text())[-1] == "kept as stored"
