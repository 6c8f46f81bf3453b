import json

from specmix.plugins.trained.prompts import TEMPLATES, topics, training_prompts


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
