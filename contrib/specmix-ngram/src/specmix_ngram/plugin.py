"""Entry point ``ngram`` in group ``specmix``: the drafter and the ``ngram`` method."""

from specmix import Method, hookimpl
from specmix_ngram.drafter import NgramDrafter


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
    ))
