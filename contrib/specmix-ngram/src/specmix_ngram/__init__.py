"""specmix-ngram: a trie of every continuation of the current n-gram seen in the context."""

from specmix_ngram.drafter import NgramDrafter

__all__ = ["NgramDrafter"]
