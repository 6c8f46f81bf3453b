"""What a corpus proposes after a context: the trie of continuations of its longest match, each node keyed for its odds.

A node's odds are kept apart by how long the match is, how deep the node sits, its
share of its parent's occurrences and how often the parent's path occurred: a long match
continues the target's text far more often than a one-token match, and a path seen fifty
times more reliably than one seen once.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import attrs

from specmix.plugins.retrieval.datastore import Datastore, Match

LENGTHS = (1, 2, 3, 4, 6, 9, 16)
"""Lower edges of the match-length classes: 1, 2, 3, 4-5, 6-8, 9-15, 16 and more tokens."""
SHARES = (0.2, 0.4, 0.6, 0.8, 0.95)
"""Upper edges of the bands of a node's share of its parent's occurrences (the last band runs to 1)."""
SUPPORTS = (1, 3, 15)
"""Upper edges of the classes of how often the parent's path occurred: once, 2-3, 4-15, more."""

Key = tuple[int, int, int, int]


def node_key(length: int, depth: int, count: int, parent_count: int) -> Key:
    """The odds key of a node ``depth`` deep below a match of ``length`` tokens, seen ``count`` times after its
    parent's ``parent_count``."""
    return (LENGTHS[bisect.bisect_right(LENGTHS, length) - 1], min(depth, 3),
            bisect.bisect_left(SHARES, count / parent_count), bisect.bisect_left(SUPPORTS, parent_count))


def coarse(key: Key) -> tuple[int, int]:
    """The match-length class and depth of a key: what a rarely seen key's rate is shrunk towards."""
    return key[:2]


@attrs.frozen
class Candidates:
    """Node 0 is the context's end; node ``i`` continues ``parents[i]`` with ``tokens[i]``, reached by the
    tokens ``paths[i]`` below node 0, with odds kept under ``keys[i]`` (None at node 0)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    paths: tuple[tuple[int, ...], ...]
    keys: tuple[Key | None, ...]

    @property
    def size(self) -> int:
        return len(self.tokens)


class GrowingMatch:
    """The longest match (up to ``longest`` tokens) of a context that only grows, a generation's or a text read in
    order, kept up to date as tokens arrive.

    Where the last match, followed by the tokens since, is held, that is the new longest match: a longer one would
    have made the last match longer. Otherwise the search runs afresh, no longer than that. A context shorter than
    the last one is another context, searched afresh."""

    def __init__(self, store: Datastore, longest: int) -> None:
        self.store, self.longest = store, longest
        self.match: Match | None = None
        self.seen = 0

    def of(self, context: Sequence[int]) -> Match | None:
        if len(context) < self.seen:
            self.match, self.seen = None, 0
        new = context[self.seen:]
        known = 0 if self.match is None else self.match.length
        found = None
        if self.match is not None and known + len(new) <= self.longest:
            found = self.store.extended(self.match, new)
        if found is None:
            found = self.store.longest_match(context, min(self.longest, known + len(new)))
        self.match, self.seen = found, len(context)
        return found


def candidates(store: Datastore, match: Match | None, nodes: int, depth: int) -> Candidates | None:
    """The continuations of ``match`` in ``store``, if there is one."""
    if match is None or depth < 1:
        return None
    found = store.continuations(match, nodes, depth)
    paths: list[tuple[int, ...]] = [()]
    keys: list[Key | None] = [None]
    for node in range(1, len(found.tokens)):
        parent = found.parents[node]
        paths.append(paths[parent] + (found.tokens[node],))
        keys.append(node_key(match.length, len(paths[-1]), found.counts[node], found.counts[parent]))
    return Candidates(found.tokens, found.parents, tuple(paths), tuple(keys))
