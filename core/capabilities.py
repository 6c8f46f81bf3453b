"""What components exchange within a step, by name: the capabilities they declare.

Each capability is one field of a value object. A component lists in ``produces`` the
ones it always fills, in ``consumes`` the ones it cannot work without, and in ``uses``
the ones it reads when they are there. The registry refuses a composition in which a
consumed capability has no producer before it; the engine checks after every call that
a component filled what it declared (see :mod:`specmix.contract`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Capability(str, enum.Enum):
    """A field of a :class:`~specmix.values.Proposal`, :class:`~specmix.tree.TokenTree` or :class:`~specmix.values.Verdict`."""

    TREE = "tree"
    """``Proposal.tree`` from a drafter; the candidate tree itself from a builder or selector."""
    MARGINALS = "marginals"
    """``Proposal.marginals``: per-position top-K draft distributions."""
    RIDERS = "riders"
    """``Proposal.riders``: in-pass drafting tokens for the verification forward (possibly none)."""
    TRANSITIONS = "transitions"
    """``Marginals.transitions``: scores of each position's candidates given the previous position's pick."""
    FEATURES = "features"
    """``Proposal.features``: the drafter's own hidden state per drafted position."""
    LOGPROBS = "logprobs"
    """``TokenTree.logprobs``: each candidate node's draft log-probability."""
    HIDDEN_STATES = "hidden-states"
    """``Verdict.hidden``: the target's hidden states of the drafter's layers at the root and accepted nodes."""
    RIDER_LOGITS = "rider-logits"
    """``Verdict.rider_logits``: the target's logits at every rider the verified proposal carried."""

    def __str__(self) -> str:
        return self.value


def capabilities(names: Iterable, owner: str) -> frozenset[Capability]:
    """``names`` (capabilities or their string values) as capabilities; an unknown name is an error naming ``owner``."""
    result = set()
    for name in names:
        try:
            result.add(Capability(name))
        except ValueError:
            known = ", ".join(c.value for c in Capability)
            raise ValueError(f"{owner} names an unknown capability {name!r}; capabilities are {known}") from None
    return frozenset(result)
