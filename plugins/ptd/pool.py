"""PTD's candidate pool: per token, a trie of continuations seen after it, capped, oldest branch out first."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence

import attrs

from specmix import TokenTree


@attrs.define(eq=False)
class TrieNode:
    children: dict[int, TrieNode] = attrs.Factory(dict)
    count: int = 0
    touched: int = 0

    def size(self) -> int:
        return 1 + sum(child.size() for child in self.children.values())


class CandidatePool:
    """``pool[token]`` is a trie of what followed ``token``; at most ``max_nodes`` nodes below each key."""

    def __init__(self, max_nodes: int = 60):
        self.max_nodes = max_nodes
        self.tries: dict[int, TrieNode] = {}
        self.clock = itertools.count()

    def add(self, key: int, paths: Iterable[Sequence[int]]) -> None:
        """Insert paths below ``key``, then evict the least recently touched first-level branches past the cap."""
        trie = self.tries.setdefault(key, TrieNode())
        for path in paths:
            node, now = trie, next(self.clock)
            for token in path:
                node = node.children.setdefault(token, TrieNode())
                node.count += 1
                node.touched = now
        while trie.size() - 1 > self.max_nodes and len(trie.children) > 1:
            oldest = min(trie.children, key=lambda token: trie.children[token].touched)
            del trie.children[oldest]
        if trie.size() - 1 > self.max_nodes:  # one branch alone is too big: keep its most used part
            self._prune(trie, self.max_nodes)

    def _prune(self, trie: TrieNode, budget: int) -> None:
        kept = 0
        frontier = [trie]
        while frontier:
            node = frontier.pop(0)
            for token, child in sorted(node.children.items(), key=lambda item: -item[1].count):
                if kept < budget:
                    kept += 1
                    frontier.append(child)
                else:
                    del node.children[token]

    def tree(self, root: int, vocab_size: int, max_depth: int,
             continue_logprob: Callable[[int], float]) -> TokenTree:
        """The trie below ``root`` as a candidate tree, best-counted children first.

        An edge's log-probability is its share of its parent's count plus
        ``continue_logprob(depth)``, the calibrated chance the target goes on at all.
        """
        tokens, parents, logprobs = [root], [-1], [0.0]
        trie = self.tries.get(root)
        frontier = [] if trie is None else [(trie, 0, 0)]
        while frontier:
            node, index, depth = frontier.pop(0)
            if depth >= max_depth:
                continue
            total = sum(child.count for child in node.children.values())
            for token, child in sorted(node.children.items(), key=lambda item: -item[1].count):
                tokens.append(token)
                parents.append(index)
                logprobs.append(math.log(child.count / total) + continue_logprob(depth + 1))
                frontier.append((child, len(tokens) - 1, depth + 1))
        return TokenTree(tokens=tokens, parents=parents, vocab_size=vocab_size, logprobs=logprobs)
