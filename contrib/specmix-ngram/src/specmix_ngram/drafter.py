"""The n-gram trie drafter."""

from __future__ import annotations

import math
from collections import defaultdict

from specmix import ConfigurationError, Drafter, Proposal, TokenTree


class NgramDrafter(Drafter):
    """Proposes the trie of continuations after earlier occurrences of the context's last n-gram.

    An index from each n-gram (``min_ngram <= n <= max_ngram``) to the positions right
    after it grows with every committed token, so a lookup costs only its matches. The
    longest n with a match wins; its ``max_matches`` most recent occurrences each give a
    continuation of up to ``depth`` tokens. An edge's log-probability is the share of
    continuations through it times ``confidence`` per token.
    """

    produces = frozenset({"tree"})

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, depth: int = 10, max_matches: int = 8,
                 confidence: float = 0.8):
        if not 1 <= min_ngram <= max_ngram:
            raise ConfigurationError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}")
        if depth < 1 or max_matches < 1:
            raise ConfigurationError("depth and max_matches must be at least 1")
        if not 0 < confidence <= 1:
            raise ConfigurationError(f"confidence must lie in (0, 1], got {confidence}")
        self.max_ngram, self.min_ngram, self.depth = max_ngram, min_ngram, depth
        self.max_matches, self.log_confidence = max_matches, math.log(confidence)

    def start(self, prompt, hidden):
        self.tokens: list[int] = []
        self.index: dict[tuple[int, ...], list[int]] = defaultdict(list)
        self._extend(prompt.tolist())

    def _extend(self, new: list[int]) -> None:
        """Append tokens; index every n-gram that now ends before the last token (its follower is known)."""
        tokens = self.tokens
        for token in new:
            tokens.append(token)
            end = len(tokens) - 1  # the n-grams ending at end-1 are now followed by tokens[end]
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end - n >= 0:
                    self.index[tuple(tokens[end - n:end])].append(end)

    def propose(self, ctx):
        tokens = self.tokens
        continuations = []
        for n in range(min(self.max_ngram, len(tokens)), self.min_ngram - 1, -1):
            starts = self.index.get(tuple(tokens[-n:]))
            if starts:
                continuations = [tokens[s:s + self.depth] for s in reversed(starts[-self.max_matches:])]
                break
        if not continuations:
            return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size))
        trie = TokenTree.from_paths(ctx.root, continuations, ctx.vocab_size)
        through = [0] * trie.size
        for path in continuations:  # count the continuations passing through each node
            node = 0
            for token in path:
                node = next(c for c in trie.children[node] if trie.token_list[c] == token)
                through[node] += 1
        through[0] = len(continuations)
        logprobs = [0.0] + [
            math.log(through[i] / through[trie.parent_list[i]]) + self.log_confidence for i in range(1, trie.size)
        ]
        return Proposal(tree=TokenTree(tokens=trie.tokens, parents=trie.parents, vocab_size=ctx.vocab_size,
                                       logprobs=logprobs))

    def observe(self, verdict, ctx):
        self._extend(list(verdict.committed))
