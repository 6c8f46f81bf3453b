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

from specmix.plugins.retrieval.datastore import Datastore

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


def candidates(store: Datastore, context: Sequence[int], longest: int, nodes: int, depth: int) -> Candidates | None:
    """The continuations of the longest suffix of ``context`` (up to ``longest`` tokens) that ``store`` holds, if any."""
    match = store.longest_match(context, longest)
    if match is None or depth < 1:
        return None
    found = store.continuations(match, nodes, depth)
    paths, keys = [()], [None]
    for node in range(1, len(found.tokens)):
        parent = found.parents[node]
        paths.append(paths[parent] + (found.tokens[node],))
        keys.append(node_key(match.length, len(paths[-1]), found.counts[node], found.counts[parent]))
    return Candidates(found.tokens, found.parents, tuple(paths), tuple(keys))
