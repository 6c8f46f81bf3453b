"""The candidate token tree: the one structure every builder, selector and verifier shares."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
import torch

from specmix.errors import MalformedTreeError


def _as_long(value: object) -> torch.Tensor:
    return torch.as_tensor(value, dtype=torch.long).reshape(-1)


def _as_optional_float(value: object) -> torch.Tensor | None:
    return None if value is None else torch.as_tensor(value, dtype=torch.float64)


@attrs.frozen
class TokenTree:
    """A rooted tree of candidate tokens, stored parents-first.

    Node 0 is the root: the last committed token, whose key/value pair is not yet in
    the cache. Node ``i > 0`` continues the path to ``parents[i] < i``, so every tree is
    prefix-closed by construction. Sibling tokens are distinct and every id lies in
    ``[0, vocab_size)``; construction fails with :class:`MalformedTreeError` otherwise.

    ``logprobs[i]`` (optional) is the drafter's log-probability of node ``i`` given its
    parent's path (0 at the root). ``draft_q[i]`` (optional) is the distribution the
    drafter sampled node ``i``'s children from, one at a time without replacement in
    index order; a verifier may then use recursive rejection instead of sample-and-match.
    """

    tokens: torch.Tensor = attrs.field(converter=_as_long, eq=False)
    parents: torch.Tensor = attrs.field(converter=_as_long, eq=False)
    vocab_size: int = attrs.field(validator=attrs.validators.gt(0))
    logprobs: torch.Tensor | None = attrs.field(default=None, converter=_as_optional_float, eq=False)
    draft_q: torch.Tensor | None = attrs.field(default=None, eq=False)
    token_list: tuple[int, ...] = attrs.field(init=False, eq=True)
    parent_list: tuple[int, ...] = attrs.field(init=False, eq=True)
    depth_list: tuple[int, ...] = attrs.field(init=False, eq=False)
    children: tuple[tuple[int, ...], ...] = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        tokens, parents = self.tokens.tolist(), self.parents.tolist()
        n = len(tokens)
        if n == 0:
            raise MalformedTreeError("a token tree needs at least its root")
        if len(parents) != n:
            raise MalformedTreeError(f"{n} tokens but {len(parents)} parent indices")
        if parents[0] != -1:
            raise MalformedTreeError(f"node 0 is the root and needs parent -1, not {parents[0]}")
        bad = [t for t in tokens if not 0 <= t < self.vocab_size]
        if bad:
            raise MalformedTreeError(f"token ids {bad[:5]} lie outside the vocabulary [0, {self.vocab_size})")
        children: list[list[int]] = [[] for _ in range(n)]
        depths = [0] * n
        for i in range(1, n):
            p = parents[i]
            if not 0 <= p < i:
                raise MalformedTreeError(f"node {i} has parent {p}; parents must come before their children")
            if any(tokens[c] == tokens[i] for c in children[p]):
                raise MalformedTreeError(f"node {p} has two children with token {tokens[i]}; siblings must be distinct")
            children[p].append(i)
            depths[i] = depths[p] + 1
        if self.logprobs is not None and self.logprobs.shape != (n,):
            raise MalformedTreeError(f"logprobs has shape {tuple(self.logprobs.shape)}, expected ({n},)")
        if self.logprobs is not None and not bool((self.logprobs <= 1e-6).all()):
            raise MalformedTreeError("logprobs must be log-probabilities (<= 0)")
        if self.draft_q is not None and tuple(self.draft_q.shape) != (n, self.vocab_size):
            raise MalformedTreeError(f"draft_q has shape {tuple(self.draft_q.shape)}, expected ({n}, {self.vocab_size})")
        set_ = object.__setattr__
        set_(self, "token_list", tuple(tokens))
        set_(self, "parent_list", tuple(parents))
        set_(self, "depth_list", tuple(depths))
        set_(self, "children", tuple(tuple(c) for c in children))

    @classmethod
    def root_only(cls, token: int, vocab_size: int) -> TokenTree:
        return cls(tokens=[token], parents=[-1], vocab_size=vocab_size)

    @classmethod
    def from_paths(cls, root: int, paths: Iterable[Sequence[int]], vocab_size: int) -> TokenTree:
        """The trie of ``paths`` below ``root``, nodes numbered in insertion order."""
        tokens, parents, index = [root], [-1], {}
        for path in paths:
            node = 0
            for token in path:
                key = (node, int(token))
                if key not in index:
                    index[key] = len(tokens)
                    tokens.append(int(token))
                    parents.append(node)
                node = index[key]
        return cls(tokens=tokens, parents=parents, vocab_size=vocab_size)

    @property
    def size(self) -> int:
        return len(self.token_list)

    @property
    def root(self) -> int:
        return self.token_list[0]

    @property
    def max_depth(self) -> int:
        return max(self.depth_list)

    def path(self, node: int) -> list[int]:
        """Node indices from the root's first child down to ``node`` (empty for the root)."""
        nodes = []
        while node > 0:
            nodes.append(node)
            node = self.parent_list[node]
        return nodes[::-1]

    def cumulative_logprobs(self) -> torch.Tensor | None:
        """Log-probability of each node's whole path under the drafter, or None without logprobs."""
        if self.logprobs is None:
            return None
        cumulative = self.logprobs.clone()
        for i in range(1, self.size):
            cumulative[i] += cumulative[self.parent_list[i]]
        return cumulative

    def ancestor_mask(self) -> torch.Tensor:
        """``mask[i, j]`` is True where node ``j`` is node ``i`` or one of its ancestors."""
        mask = torch.zeros(self.size, self.size, dtype=torch.bool)
        mask[0, 0] = True
        for i in range(1, self.size):
            mask[i] = mask[self.parent_list[i]]
            mask[i, i] = True
        return mask

    def subtree(self, keep: Iterable[int]) -> TokenTree:
        """The tree of the nodes in ``keep``, which must hold the root and be prefix-closed.

        ``draft_q`` survives only when every node is kept: pruning sampled siblings by a
        rule that looks at their values would bias recursive rejection, while
        sample-and-match stays exact for any candidate set.
        """
        kept = sorted(set(int(i) for i in keep))
        if not kept or kept[0] != 0:
            raise MalformedTreeError("a subtree must keep the root (node 0)")
        new_index = {old: new for new, old in enumerate(kept)}
        parents = [-1]
        for old in kept[1:]:
            parent = self.parent_list[old] if 0 <= old < self.size else None
            if parent not in new_index:
                raise MalformedTreeError(f"node {old} is kept without its parent; subtrees must be prefix-closed")
            parents.append(new_index[parent])
        index = torch.tensor(kept)
        whole = len(kept) == self.size
        return TokenTree(
            tokens=self.tokens[index],
            parents=parents,
            vocab_size=self.vocab_size,
            logprobs=None if self.logprobs is None else self.logprobs[index],
            draft_q=self.draft_q if whole else None,
        )

    def truncated(self, max_depth: int) -> TokenTree:
        """This tree without nodes deeper than ``max_depth`` (itself when none are)."""
        if self.max_depth <= max_depth:
            return self
        return self.subtree(i for i, d in enumerate(self.depth_list) if d <= max_depth)
