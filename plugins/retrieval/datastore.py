"""A datastore of token sequences, searched by suffix array: the longest match of a context, and what followed it.

REST and SuffixDecoding draft from text written before: find the longest suffix of the
context that occurs in a corpus and propose what most often came next. A suffix array
(every suffix's start, in lexicographic order) finds all occurrences of a pattern by two
binary searches, and because the suffixes that share a prefix lie side by side, the
tokens that follow the pattern are sorted within that range: each child of a
continuation is a contiguous sub-range, found without scanning the corpus.

Documents are stored back to back, each followed by a separator that no token equals,
so no match and no continuation runs from one document into the next.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
import numpy as np

from specmix import ConfigurationError

SEPARATOR = -1
SMALL_RANGE = 64
"""Ranges of at most this many suffixes are grouped in Python, larger ones with numpy."""


def suffix_array(text: np.ndarray) -> np.ndarray:
    """The start of every suffix of ``text`` in lexicographic order, by prefix doubling (each separator unique)."""
    n = len(text)
    keys = text.astype(np.int64)
    separators = np.flatnonzero(keys == SEPARATOR)
    keys[separators] = -1 - np.arange(len(separators))  # below every token, and each its own: suffixes never tie on one
    rank = np.unique(keys, return_inverse=True)[1].reshape(-1)
    span = 1
    while True:
        following = np.full(n, -1, dtype=np.int64)
        following[: n - span] = rank[span:]
        order = np.lexsort((following, rank))
        first, second = rank[order], following[order]
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.cumsum(new_group) - 1
        if new_group.all():
            return order
        span *= 2


@attrs.frozen
class Match:
    """Where a context's last ``length`` tokens occur: the suffixes ``[low, high)`` of the array."""

    length: int
    low: int
    high: int

    @property
    def count(self) -> int:
        return self.high - self.low


@attrs.frozen
class Continuations:
    """A trie of what followed a match, most frequent first: node 0 is the match itself.

    ``tokens[i]`` followed ``parents[i]``'s path ``counts[i]`` times (``counts[0]``: the
    match's occurrences). Siblings are distinct and parents come first.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    counts: tuple[int, ...]


class Datastore:
    """Token sequences, searchable by their suffixes: ``text`` holds them back to back, each followed by -1."""

    def __init__(self, text: np.ndarray):
        text = np.asarray(text, dtype=np.int64)
        if len(text) == 0 or text[-1] != SEPARATOR:
            raise ConfigurationError("a datastore's text must end with a separator (-1) after its last document")
        if (text < SEPARATOR).any():
            raise ConfigurationError("a datastore's text holds token ids (non-negative) and separators (-1) only")
        self.text, self.suffixes = text, suffix_array(text)
        # Binary search compares short slices; Python lists make that several times cheaper than array slices.
        self._text, self._suffixes = self.text.tolist(), self.suffixes.tolist()

    @classmethod
    def of(cls, documents: Iterable[Sequence[int]]) -> Datastore:
        """The documents, each followed by a separator (an empty datastore holds one empty document)."""
        parts = []
        for document in documents:
            tokens = np.asarray(document, dtype=np.int64)
            if (tokens < 0).any():
                raise ConfigurationError("token ids in a datastore must be non-negative")
            parts.extend([tokens, np.array([SEPARATOR])])
        return cls(np.concatenate(parts) if parts else np.array([SEPARATOR]))

    @property
    def tokens(self) -> int:
        """The tokens stored (separators not counted)."""
        return int((self.text != SEPARATOR).sum())

    @property
    def documents(self) -> int:
        return int((self.text == SEPARATOR).sum())

    def save(self, path: Path) -> None:
        """The text as one int32 array; the suffix array is rebuilt on load (about a second per 300,000 tokens)."""
        np.save(path, self.text.astype(np.int32))

    @classmethod
    def load(cls, path: Path) -> Datastore:
        return cls(np.load(path))

    def occurrences(self, pattern: Sequence[int]) -> tuple[int, int]:
        """The range ``[low, high)`` of suffixes that begin with ``pattern``."""
        text, suffixes, size, pattern = self._text, self._suffixes, len(pattern), list(pattern)
        low, high = 0, len(suffixes)
        while low < high:
            middle = (low + high) // 2
            start = suffixes[middle]
            if text[start:start + size] < pattern:
                low = middle + 1
            else:
                high = middle
        first, high = low, len(suffixes)
        while low < high:
            middle = (low + high) // 2
            start = suffixes[middle]
            if text[start:start + size] <= pattern:
                low = middle + 1
            else:
                high = middle
        return first, low

    def longest_match(self, context: Sequence[int], longest: int, shortest: int = 1) -> Match | None:
        """The longest suffix of ``context`` (``shortest`` to ``longest`` tokens) that the datastore holds, if any.

        A suffix that occurs has every shorter suffix occur too, so the length is found by binary search.
        """
        found, low, high = None, shortest, min(longest, len(context))
        while low <= high:
            length = (low + high) // 2
            first, last = self.occurrences(context[len(context) - length:])
            if last > first:
                found, low = Match(length, first, last), length + 1
            else:
                high = length - 1
        return found

    def extended(self, match: Match, following: Sequence[int]) -> Match | None:
        """Where ``match`` went on with ``following``: the sub-range of its suffixes that continue so, if any.

        Within a range the tokens at any offset past the shared prefix are sorted, so each token narrows it by two
        binary searches over the range alone (a separator sorts below every token)."""
        text, suffixes = self._text, self._suffixes
        low, high = match.low, match.high
        for offset, token in enumerate(following, start=match.length):
            low = bisect.bisect_left(suffixes, token, low, high,
                                     key=lambda start, offset=offset: text[start + offset])  # type: ignore[misc]
            high = bisect.bisect_right(suffixes, token, low, high,
                                       key=lambda start, offset=offset: text[start + offset])  # type: ignore[misc]
            if low == high:
                return None
        return Match(match.length + len(following), low, high)

    def continuations(self, match: Match, nodes: int, depth: int) -> Continuations:
        """Up to ``nodes`` continuations of ``match``, best first by how often their path followed it,
        at most ``depth`` tokens deep."""
        tokens, parents, counts = [SEPARATOR], [-1], [match.count]
        serial = itertools.count()  # ties go to the candidate found first, so parents come before their children
        candidates: list[tuple[int, int, int, int, int, int]] = []  # (-count, serial, token, parent, low, depth)

        def push_children(node: int, low: int, high: int, level: int) -> None:
            for token, start, size in self._followers(low, high, match.length + level):
                if token != SEPARATOR:
                    heapq.heappush(candidates, (-size, next(serial), token, node, start, level + 1))

        push_children(0, match.low, match.high, 0)
        while candidates and len(tokens) <= nodes:
            negative, _, token, parent, low, level = heapq.heappop(candidates)
            tokens.append(token)
            parents.append(parent)
            counts.append(-negative)
            if level < depth:
                push_children(len(tokens) - 1, low, low - negative, level)
        return Continuations(tuple(tokens), tuple(parents), tuple(counts))

    def _followers(self, low: int, high: int, offset: int) -> Sequence[Sequence[int]]:
        """The distinct tokens ``offset`` tokens into the suffixes ``[low, high)``, each with its sub-range's start and
        size. The suffixes share their first ``offset`` tokens (a path holds no separator, so none runs past the
        text), hence those tokens are sorted and each one's suffixes lie side by side."""
        if high - low <= SMALL_RANGE:  # most ranges below a match are tiny: a loop beats numpy's call overhead
            text, suffixes = self._text, self._suffixes
            groups: list[list[int]] = []
            for index in range(low, high):
                token = text[suffixes[index] + offset]
                if groups and groups[-1][0] == token:
                    groups[-1][2] += 1
                else:
                    groups.append([token, index, 1])
            return groups
        following = self.text[self.suffixes[low:high] + offset]
        values, starts, sizes = np.unique(following, return_index=True, return_counts=True)
        return list(zip(values.tolist(), (low + starts).tolist(), sizes.tolist()))
