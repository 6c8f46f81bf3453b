"""Methods with and without learnt step costs (``Decoder(learn_costs=...)``), side by side in one process.

Both decoders of a method price steps on the same cached cost curve; prompts interleave
every decoder, in reverse order every other prompt. Greedy, 256 new tokens, the default model.

    python benchmarks/learn_costs_ab.py mt_bench.jsonl ddtree,mix      # first prompt of every category
"""

import collections
import sys

from specmix import Decoder, DecodeSettings, Registry
from specmix.bench.prompts import load_prompts
from specmix.models.loading import load_model
from specmix.text import encode


def main(prompts_file: str, methods: str) -> None:
    prompts = load_prompts(prompts_file, per_category=1)
    model, tokenizer = load_model(None)
    registry = Registry.load()
    curve = Decoder(model, registry.compose("mix"), tokenizer=tokenizer).cost_curve
    decoders = {"vanilla": Decoder(model, registry.compose("vanilla"), tokenizer=tokenizer)}
    for method in methods.split(","):
        for learn in (True, False):
            decoders[f"{method} ({'learnt' if learn else 'curve'})"] = Decoder(
                model, registry.compose(method), tokenizer=tokenizer, cost_curve=curve, learn_costs=learn)
    for decoder in decoders.values():  # warm-up
        decoder.generate("Hello there, how are you?", DecodeSettings(max_new_tokens=8))
    totals = collections.defaultdict(lambda: [0, 0.0, 0])
    names = list(decoders)
    for index, prompt in enumerate(prompts):
        ids = encode(tokenizer, prompt.text)
        for name in names if index % 2 == 0 else names[::-1]:
            result = decoders[name].generate(ids, DecodeSettings(max_new_tokens=256))
            totals[name] = [a + b for a, b in zip(totals[name], (len(result.tokens), result.seconds, len(result.steps)))]
    plain = totals["vanilla"][0] / totals["vanilla"][1]
    print("| method | tokens/s | vs vanilla | τ |\n|---|---|---|---|")
    for name, (tokens, seconds, steps) in totals.items():
        print(f"| {name} | {tokens / seconds:.2f} | {tokens / seconds / plain:.3f} | {tokens / steps:.2f} |")
    for name, decoder in decoders.items():
        if decoder.step_costs is not None:
            ratios = ", ".join(f"{size}: {ratio:.2f}" for size, ratio in sorted(decoder.step_costs.ratios.items()))
            print(f"\n{name}, learnt ratios to the curve by size: {ratios}")


if __name__ == "__main__":
    main(*sys.argv[1:])
