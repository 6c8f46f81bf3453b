"""PTD's progressive draft tree: tokens that ride in every verification forward to grow themselves.

The root's children form the *spine*. With ``linked_spine`` spine node i also sees spine
nodes 0..i-1, Jacobi-style; without it every spine subtree is an independent branch
from the root (Self-Draft / lookahead-like). Any other node sees the root, the spine
before its own subtree (when linked) and its own ancestors. After each forward a node's
prediction (the target's argmax there) becomes its child, up to ``max_children``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import attrs
import torch

from specmix import Riders


@attrs.define(eq=False)
class DraftNode:
    token: int
    children: list[DraftNode] = attrs.Factory(list)
    prediction: int | None = None

    def paths(self) -> Iterator[list[int]]:
        """Every path of tokens from this node's children down to a leaf."""
        for child in self.children:
            below = list(child.paths())
            if not below:
                yield [child.token]
            for path in below:
                yield [child.token, *path]

    def height(self) -> int:
        return max((1 + child.height() for child in self.children), default=0)


class ProgressiveDraftTree:
    def __init__(self, spine: int = 4, max_children: int = 4, max_depth: int = 6, max_riders: int = 16,
                 linked_spine: bool = True):
        self.spine_size, self.max_children, self.max_depth = spine, max_children, max_depth
        self.max_riders, self.linked_spine = max_riders, linked_spine
        self.spine: list[DraftNode] = []
        self.sent: list[DraftNode] = []

    def seed(self, prompt: Sequence[int], rng: random.Random, chains: int = 2) -> None:
        """Start from ``chains`` chains of one or two tokens copied from random places in the prompt."""
        self.spine = []
        for _ in range(chains):
            start = rng.randrange(len(prompt))
            chain = prompt[start:start + rng.randint(1, 2)]
            node = DraftNode(chain[0])
            if len(chain) > 1:
                node.children.append(DraftNode(chain[1]))
            self.spine.append(node)

    def riders(self, limit: int | None = None) -> Riders:
        """The tree in depth-first order (at most ``limit``, else ``max_riders``, nodes; maybe none), remembered for ``grow``."""
        limit = self.max_riders if limit is None else min(limit, self.max_riders)
        order: list[DraftNode] = []
        offsets: list[int] = []
        visible_sets: list[list[int]] = []
        heads: list[int] = []
        for head in self.spine:
            if len(order) >= limit:
                break
            prefix = list(heads) if self.linked_spine else []
            heads.append(len(order))
            stack: list[tuple[DraftNode, list[int]]] = [(head, [])]
            while stack and len(order) < limit:
                node, ancestors = stack.pop()
                path = [*ancestors, len(order)]
                order.append(node)
                visible_sets.append(prefix + path)
                offsets.append(len(prefix) + len(path))
                stack.extend((child, path) for child in reversed(node.children))
        self.sent = order
        visible = torch.zeros(len(order), len(order) + 1, dtype=torch.bool)
        visible[:, 0] = True
        for row, columns in enumerate(visible_sets):
            visible[row, [c + 1 for c in columns]] = True
        return Riders(tokens=torch.tensor([n.token for n in order], dtype=torch.long),
                      offsets=torch.tensor(offsets, dtype=torch.long), visible=visible)

    def grow(self, predictions: Sequence[int], stop_ids: frozenset[int]) -> None:
        """Record each sent node's prediction and make it a child (a new one, if there is room).

        Predictions that are stop ids are not grown, and subtrees holding one are pruned:
        a draft past the end of the text is wasted forward time.
        """
        for node, prediction in zip(self.sent, predictions):
            node.prediction = prediction
            node.children = [c for c in node.children if c.token not in stop_ids]
            if prediction in stop_ids or any(c.token == prediction for c in node.children):
                continue
            if len(node.children) < self.max_children:
                node.children.append(DraftNode(prediction))
        self.spine = [head for head in self.spine if head.token not in stop_ids]
        self._step_deep_subtrees()
        self._keep_spine_size()

    def _step_deep_subtrees(self) -> None:
        """A spine subtree that reached ``max_depth`` gives way to its oldest child, moved to the spine's end."""
        for head in [h for h in self.spine if h.height() + 1 >= self.max_depth]:
            self.spine.remove(head)
            on_spine = {h.token for h in self.spine}
            heir = next((c for c in head.children[:1] if c.token not in on_spine), None)
            if heir is not None:
                self.spine.append(heir)

    def _keep_spine_size(self) -> None:
        """Drop the oldest spine subtrees beyond ``spine``; below it, extend with the last one's prediction."""
        del self.spine[: max(0, len(self.spine) - self.spine_size)]
        if self.spine and len(self.spine) < self.spine_size and self.spine[-1].prediction is not None:
            self.spine.append(DraftNode(self.spine[-1].prediction))
