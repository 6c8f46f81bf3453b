"""Entry point ``ngram`` in group ``specmix``: the drafter, the ``ngram`` method, and ``mix``, which adds it to specmix's own.

Both methods are offered as the default, above plain decoding: ``mix`` where its diffusion
drafter has weights for the target (the default model), else ``ngram``, which runs on any.
"""

from specmix import FALLBACK_RANK, Method, hookimpl
from specmix_ngram.drafter import NgramDrafter

OFFERED = FALLBACK_RANK + 10
"""The default rank of ``ngram``; ``mix`` is offered one above it."""


@hookimpl
def register_drafters(register):
    register("ngram", NgramDrafter)


@hookimpl
def register_methods(register):
    register(Method(
        name="ngram",
        drafter="ngram",
        builder="drafted",
        selector="budget",
        verifier="tree",
        description="A trie of every continuation of the current n-gram in the context, cut by the cost curve.",
        default=OFFERED,
    ))
    register(Method(
        name="mix",
        drafter="ngram+diffusion+ptd",
        builder="drafted+best-first+drafted",
        selector="budget",
        verifier="tree",
        options={"drafter": {"diffusion.adaptive_block": True}, "builder": {"best-first.nodes": 8}},
        description="Lookup where the text repeats, the diffusion drafter's first positions where it does not, PTD's "
                    "pool where the model repeats itself: one tree, calibrated per drafter, cut by the cost curve.",
        default=OFFERED + 1,
    ))
