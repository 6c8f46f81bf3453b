"""The CUDA path, checked and measured in one run: ``python benchmarks/gpu_check.py --out DIR`` (``--dry`` on a CPU).

1. The conformance kit's greedy and sampling properties on the device, fp32 and bf16
   targets, with static shapes and CUDA graphs on and off (``benchmarks/gpu_conformance.py``).
2. For random-weight models shaped like the default model (SmolLM2-135M) and like Qwen3-8B
   (bf16): the cost curve T(N); ``vanilla`` against transformers' ``generate``; the engine's
   efficiency with an oracle drafter of set acceptance (τ = 2, 4, 8) against the ideal
   τ·T(1)/T(N) of the measured curve; and the tree verifier's overhead over a raw forward at
   N = 1, 16, 64, with the share of a verification step the host takes.

Everything goes into ``DIR/gpu-check.json`` and a short ``DIR/gpu-check.md``. ``--dry`` runs
the same code on tiny models with a few steps, on the CPU, so that a test keeps it working.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

from specmix import Decoder, DecodeSettings, Registry, Target, TokenTree
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.sizing.measure import measure
from specmix.testing.drafters import ReplayPlugin
from specmix.values import Proposal, StepContext

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    "smollm2-135m": lambda: LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                        num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                                        max_position_embeddings=8192, tie_word_embeddings=True),
    "qwen3-8b": lambda: Qwen3Config(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                                    num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                                    max_position_embeddings=40960, tie_word_embeddings=False),
}
DRY_SHAPES = {
    "tiny-llama": lambda: LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=512),
    "tiny-qwen3": lambda: Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=512),
}


def _log(message: str) -> None:
    print(f"gpu-check: {message}", file=sys.stderr, flush=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def conformance(device: str, dry: bool, timeout: float, log: Path) -> list[dict]:
    """The kit's properties, once per precision and static-shape mode, each in its own pytest run, side by side;
    their whole output goes to ``log``."""
    modes = [("float32", "on"), ("float32", "off"), ("bfloat16", "on"), ("bfloat16", "off")]
    if dry:
        modes = modes[:1]  # static shapes, as on CUDA (without graphs on a CPU)
    runs = []
    for dtype, static in modes:
        env = {**os.environ, "SPECMIX_KIT_DEVICE": device, "SPECMIX_KIT_DTYPE": dtype, "SPECMIX_KIT_STATIC": static,
               "SPECMIX_HYPOTHESIS_PROFILE": "dev"}
        if dry:
            env.update(GPU_CHECK_COMPOSITIONS="2", GPU_CHECK_SAMPLES="60", SPECMIX_HYPOTHESIS_PROFILE="specmix-dry")
        command = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "gpu_conformance.py"), "-q",
                   "-p", "no:randomly", "-n", "0" if dry else "3", "-x" if dry else "-rf", "--tb=short"]
        runs.append((dtype, static, subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)))
    start, results = time.perf_counter(), []
    for dtype, static, run in runs:
        try:
            output, _ = run.communicate(timeout=max(1.0, timeout - (time.perf_counter() - start)))
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)  # pytest's workers too, which would go on using the device
            output = run.communicate()[0] + f"\ntimed out after {timeout:.0f} s"
        with log.open("a") as file:
            file.write(f"===== conformance {dtype}, static {static}\n{output}\n")
        lines = output.strip().splitlines() or [""]
        failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        results.append({"dtype": dtype, "static_and_graphs": static, "passed": run.returncode == 0,
                        "summary": lines[-1], "failures": failures[:20], "tail": lines[-60:] if failures or
                        run.returncode else [], "seconds": time.perf_counter() - start})
        _log(f"conformance {dtype}, static {static}: {lines[-1]}")
    return results


@torch.no_grad()
def _model(config, device: torch.device, dtype: torch.dtype):
    """Random weights, made decisive: each token's embedding dominates the residual stream and the LM head reads
    it back, so the model repeats its last token by a margin no rounding can close. Random weights alone leave
    the top two logits so close that bf16 kernels of other shapes pick either, and then neither ``hf`` nor an
    oracle drafter follows one greedy text; this model's greedy text is the same under every kernel, and its
    shapes, hence its costs, are those of the model it stands for."""
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    embedding = model.get_input_embeddings().weight
    embedding.normal_(0.0, 100.0)
    head = model.get_output_embeddings().weight
    if head.data_ptr() != embedding.data_ptr():
        head.copy_(embedding)
    model.generation_config.eos_token_id = None  # every run goes the full length
    model.set_attn_implementation("sdpa")
    return model.eval()


def _hf_greedy(model, prompt: torch.Tensor, count: int) -> tuple[list[int], float]:
    _sync(model.device)
    start = time.perf_counter()
    out = model.generate(prompt[None], attention_mask=torch.ones_like(prompt)[None], max_new_tokens=count,
                         min_new_tokens=count, do_sample=False, temperature=None, top_p=None, top_k=None)
    _sync(model.device)
    return out[0, prompt.shape[0]:].tolist(), time.perf_counter() - start


def _specmix(decoder: Decoder, prompt: torch.Tensor, count: int):
    decoder.generate(prompt.tolist(), DecodeSettings(max_new_tokens=min(count, 8), stop_ids=()))  # warm-up
    _sync(decoder.target.device)
    generation = decoder.generate(prompt.tolist(), DecodeSettings(max_new_tokens=count, stop_ids=()))
    _sync(decoder.target.device)
    return generation


def verifier_overhead(model, sizes, context: int, rounds: int) -> list[dict]:
    """A chain of N nodes verified through specmix (tree mask, cache, walk, compaction) against the same
    forward straight through the model, both timed to the GPU's end; the host's share of the step is
    what the GPU's own time of the forward leaves of it."""
    from transformers import DynamicCache

    device, vocab = model.device, model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    history = torch.randint(vocab, (context,), generator=generator)
    rows = []
    for n in sizes:
        tree = TokenTree.from_paths(1, [[2 + i for i in range(n - 1)]], vocab_size=vocab)
        ctx = StepContext(step=0, tokens=torch.cat([history, torch.tensor([1])]), settings=DecodeSettings(),
                          vocab_size=vocab, max_depth=n)
        target, verifier = Target(model), TreeVerifier()
        raw, ours, gpu = [], [], []
        for _ in range(rounds + 1):
            cache = DynamicCache()
            with torch.no_grad():
                model(input_ids=history.to(device)[None], cache=cache, use_cache=True)
                ids = torch.randint(vocab, (1, n), generator=generator).to(device)
                started, ended = (torch.cuda.Event(enable_timing=True) for _ in range(2)) if device.type == "cuda" \
                    else (None, None)
                _sync(device)
                start = time.perf_counter()
                if started is not None:
                    started.record()
                model(input_ids=ids, cache=cache, use_cache=True)
                if ended is not None:
                    ended.record()
                _sync(device)
                raw.append(time.perf_counter() - start)
                gpu.append(started.elapsed_time(ended) / 1000 if started is not None else raw[-1])
            target.reset()
            target.prefill(history)
            _sync(device)
            start = time.perf_counter()
            verifier.verify(target, tree, Proposal(), ctx, ())
            _sync(device)
            ours.append(time.perf_counter() - start)
        raw, ours, gpu = sorted(raw[1:]), sorted(ours[1:]), sorted(gpu[1:])
        median = lambda samples: samples[len(samples) // 2]  # noqa: E731
        rows.append({"n": n, "raw_forward_s": median(raw), "verify_s": median(ours), "gpu_forward_s": median(gpu),
                     "overhead": median(ours) / median(raw) - 1,
                     "host_share": max(0.0, 1 - median(gpu) / median(ours))})
    return rows


def measure_shape(name: str, config, device: torch.device, dry: bool) -> dict:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    _log(f"{name}: building a random {dtype} model")
    model = _model(config, device, dtype)
    tokens, context = (16, 32) if dry else (128, 256)
    prompt = torch.randint(config.vocab_size, (context,), generator=torch.Generator().manual_seed(1)).to(device)
    target = Target(model)
    sizes = (1, 2, 4, 8) if dry else (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
    curve = measure(target, sizes=sizes, context=context, repeats=2 if dry else 5, longer=None)
    _log(f"{name}: T(N) {dict(zip(curve.sizes, (round(s * 1000, 3) for s in curve.seconds)))} ms")
    registry = Registry.load(extra_plugins=[ReplayPlugin()])

    _hf_greedy(model, prompt, 8)  # warms transformers up
    hf_tokens, hf_seconds = _hf_greedy(model, prompt, tokens)
    hf_rate = tokens / hf_seconds
    vanilla = _specmix(Decoder(model, registry.compose("vanilla"), cost_curve=curve), prompt, tokens)
    _log(f"{name}: hf {hf_rate:.1f} tokens/s, vanilla {vanilla.tokens_per_s:.1f} (identical: "
         f"{list(vanilla.tokens) == hf_tokens})")

    path = prompt.tolist() + hf_tokens
    efficiency = []
    for tau in (2, 4, 8):
        names = dict(drafter="kit-replay", builder="drafted", selector="all", verifier="tree")
        decoder = Decoder(model, registry.compose(options={"drafter": {"path": path, "length": tau - 1}}, **names),
                          cost_curve=curve)
        run = _specmix(decoder, prompt, tokens)
        # Every step verifies a chain of tau positions; the ideal is priced at the tau the run achieved.
        ideal = run.tau * curve.time(1) / curve.time(tau)
        achieved, over_vanilla = run.tokens_per_s / hf_rate, run.tokens_per_s / vanilla.tokens_per_s
        efficiency.append({"tau_set": tau, "tau": run.tau, "speedup_vs_hf": achieved, "ideal": ideal,
                           "share_of_ideal": achieved / ideal, "speedup_vs_vanilla": over_vanilla,
                           "identical": list(run.tokens) == hf_tokens})
        _log(f"{name}: tau {run.tau:.2f}: {achieved:.2f}x hf, {over_vanilla:.2f}x vanilla, ideal {ideal:.2f}x "
             f"({achieved / ideal:.0%} against hf, {over_vanilla / ideal:.0%} against vanilla)")
    overhead = verifier_overhead(model, (1, 16) if dry else (1, 16, 64), context, 2 if dry else 20)
    for row in overhead:
        _log(f"{name}: verifier at N={row['n']}: {row['overhead']:+.1%} over a raw forward, host {row['host_share']:.0%}")
    del model, target
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"dtype": str(dtype).removeprefix("torch."), "cost_curve": curve.to_json(), "hf_tokens_per_s": hf_rate,
            "vanilla_tokens_per_s": vanilla.tokens_per_s, "vanilla_vs_hf": vanilla.tokens_per_s / hf_rate,
            "vanilla_identical": list(vanilla.tokens) == hf_tokens, "efficiency": efficiency,
            "verifier_overhead": overhead}


def markdown(report: dict) -> str:
    lines = [f"# GPU check ({report['device']}, torch {report['torch']}, transformers {report['transformers']}, "
             f"{report['seconds']:.0f} s)", "",
             "| conformance | static shapes and graphs | result |", "|---|---|---|"]
    lines += [f"| {r['dtype']} | {r['static_and_graphs']} | {r['summary']} |" for r in report["conformance"]]
    for run in report["conformance"]:
        if run["tail"]:
            lines += ["", f"{run['dtype']}, static {run['static_and_graphs']}:", "", "```", *run["tail"], "```"]
    for name, shape in report["shapes"].items():
        if "error" in shape:
            lines += ["", f"## {name}: failed", "", "```", shape["error"].strip(), "```"]
            continue
        curve = ", ".join(f"T({n}) {s * 1000:.2f}" for n, s in zip(shape["cost_curve"]["sizes"], shape["cost_curve"]["seconds"])
                          if n in (1, 2, 4, 8, 16, 32, 64, 128))
        lines += ["", f"## {name} ({shape['dtype']}, random weights)", "", f"Cost curve (ms): {curve}", "",
                  f"vanilla {shape['vanilla_tokens_per_s']:.1f} tokens/s against hf {shape['hf_tokens_per_s']:.1f}: "
                  f"{shape['vanilla_vs_hf']:.2f}x (identical: {shape['vanilla_identical']})", "",
                  "| oracle τ | speedup vs hf | vs vanilla | ideal τ·T(1)/T(N) | share of ideal (vs hf) | "
                  "share of ideal (vs vanilla) | identical |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {e['tau']:.2f} | {e['speedup_vs_hf']:.2f}x | {e['speedup_vs_vanilla']:.2f}x | {e['ideal']:.2f}x | "
                  f"{e['share_of_ideal']:.0%} | {e['speedup_vs_vanilla'] / e['ideal']:.0%} | {e['identical']} |"
                  for e in shape["efficiency"]]
        lines += ["", "| N | raw forward (ms) | tree verifier (ms) | overhead | host share |", "|---|---|---|---|---|"]
        lines += [f"| {r['n']} | {r['raw_forward_s'] * 1000:.2f} | {r['verify_s'] * 1000:.2f} | {r['overhead']:+.1%} | "
                  f"{r['host_share']:.0%} |" for r in shape["verifier_overhead"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry", action="store_true", help="tiny models and a few steps, on the CPU")
    parser.add_argument("--skip-conformance", action="store_true")
    parser.add_argument("--shapes", type=lambda names: [name for name in names.split(",") if name], default=None,
                        help=f"the model shapes to measure, comma-separated (default: all of {', '.join(SHAPES)}; "
                             "'' for none)")
    parser.add_argument("--conformance-timeout", type=float, default=240.0,
                        help="seconds the conformance runs (side by side) may take in all")
    args = parser.parse_args(argv)
    device = torch.device("cpu" if args.dry or not torch.cuda.is_available() else "cuda")
    started = time.perf_counter()
    report = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
              "transformers": transformers.__version__, "dry": args.dry, "conformance": [], "shapes": {}}
    args.out.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every part, so that a run cut short still reports what it finished
        report["seconds"] = time.perf_counter() - started
        (args.out / "gpu-check.json").write_text(json.dumps(report, indent=1))
        (args.out / "gpu-check.md").write_text(markdown(report))

    if not args.skip_conformance:
        report["conformance"] = conformance(device.type, args.dry, args.conformance_timeout,
                                            args.out / "conformance.log")
        save()
    shapes = DRY_SHAPES if args.dry else SHAPES
    for name, shape in ((name, shapes[name]) for name in (shapes if args.shapes is None else args.shapes)):
        try:
            report["shapes"][name] = measure_shape(name, shape(), device, args.dry)
        except Exception as error:  # the other shape still runs; the report says what broke
            report["shapes"][name] = {"error": "".join(traceback.format_exception(error))}
            _log(f"{name} failed: {error!r}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
        save()
    _log(f"done in {report['seconds']:.0f} s: {args.out / 'gpu-check.md'}")
    passed = all(r["passed"] for r in report["conformance"])
    return 0 if passed and not any("error" in shape for shape in report["shapes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
