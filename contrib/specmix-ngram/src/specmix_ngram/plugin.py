"""Entry point ``ngram`` in group ``specmix``: the drafter, the ``ngram`` method, and ``mix``, which adds it to specmix's own.

Both methods are offered as the default, above plain decoding: ``mix`` where specmix ships a
corpus of the target's answers (the default model), else ``ngram``, which runs on any.
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
    # The drafters that pay on a two-core CPU: lookup in the context and retrieval from the target's earlier answers.
    # The diffusion drafter and PTD join with --drafter ngram+corpus+diffusion+ptd; here their passes cost more than
    # they bring.
    register(Method(
        name="mix",
        drafter="ngram+corpus",
        builder="drafted+drafted",
        selector="budget",
        verifier="tree",
        description="Lookup where the text repeats, retrieval from the target's own earlier answers where it does not: "
                    "one tree, both scored by acceptance odds learnt from verdicts, cut by the cost curve.",
        default=OFFERED + 1,
    ))
