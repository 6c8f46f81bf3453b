"""The component interfaces. A plugin subclasses one and registers it through a hook.

Every component declares the capabilities (:class:`~specmix.capabilities.Capability`) it
``produces`` (fills on every call), ``consumes`` (cannot work without) and ``uses`` (reads
when present). The registry refuses a composition in which a component consumes what no
component before it in the step produces (for a drafter: the verifier of the previous
step), and the engine checks after every call that what was declared is there.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import ClassVar

import torch

from specmix.capabilities import Capability
from specmix.target import Target
from specmix.tree import TokenTree
from specmix.values import HiddenStates, Proposal, Run, StepContext, Verdict


class Component:
    """Shared by the four kinds of a step. Options arrive as keyword arguments to the constructor.

    ``needs_cost_curve`` asks the engine for the measured T(N) in ``StepContext.cost``
    (measured once per model and device, before anything is timed). ``test_options`` are
    the options the conformance kit builds the component with on tiny random targets (a
    drafter that needs trained weights can ask for random ones).
    """

    consumes: ClassVar[frozenset[Capability]] = frozenset()
    produces: ClassVar[frozenset[Capability]] = frozenset()
    uses: ClassVar[frozenset[Capability]] = frozenset()
    needs_cost_curve: bool = False
    test_options: ClassVar[dict] = {}

    def attach(self, target: Target) -> None:
        """Called once when a decoder is built for ``target`` (for a drafter, before ``hidden_layers`` is read).

        A component that shares the target's weights (embeddings, LM head), sizes itself
        from the target, or loads weights trained for it does so here, and refuses a
        target it was not made for (compare :attr:`Target.fingerprint`).
        """


class Drafter(Component):
    """Proposes what comes next.

    Contract: ``start`` is called once per generation after the prompt (all but its last
    token) is in the cache; ``propose`` then runs once per step and ``observe`` receives
    that step's verdict once it is committed; in a mix, on a tree that may hold none of its
    nodes (the selector kept others'). A drafter must never assume its proposal was accepted,
    must not draw from ``ctx.generator``, and must keep no state that outlives ``start``
    except a memory of earlier generations (a cross-request cache),
    which ``carried`` then describes.

    In-pass drafters put tokens in ``Proposal.riders`` and read ``Verdict.rider_logits``;
    feature-conditioned drafters list target layers in ``hidden_layers`` and read
    ``Verdict.hidden`` (and the prompt's states in ``start``).

    A drafter whose tree scores are already acceptance estimates learnt from verdicts (a
    lookup's online odds) sets ``calibrated``: a mix then takes them as they are instead
    of calibrating them again (:mod:`specmix.sizing.calibration`).
    """

    hidden_layers: tuple[int, ...] = ()
    calibrated: bool = False

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        """Begin a generation. ``prompt [P]`` is every prompt id; ``hidden`` has ``[P - 1, D]`` per layer."""

    def propose(self, ctx: StepContext) -> Proposal:
        raise NotImplementedError

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        """Learn from the step's verdict. ``ctx`` is the context the step was proposed in."""

    def carried(self) -> dict | None:
        """What this generation can draw from earlier ones (say, outputs and tokens remembered), or None if nothing.

        The benchmark records it with every run, so a reader sees what a cross-request
        cache held when each prompt ran.
        """
        return None


class TreeBuilder(Component):
    """Turns a proposal into a candidate tree rooted at ``ctx.root``.

    Contract: pure in its inputs; the result's root token is ``ctx.root``.
    """

    produces = frozenset({Capability.TREE})

    def build(self, proposal: Proposal, ctx: StepContext) -> TokenTree:
        raise NotImplementedError


class Selector(Component):
    """Picks the part of a candidate tree worth verifying.

    Contract: returns ``tree.subtree(keep)`` for a prefix-closed ``keep`` holding the root;
    which nodes to keep may depend on anything but the target's outputs for this step
    (what earlier verdicts taught it included: ``observe`` receives each step's verdict).
    """

    produces = frozenset({Capability.TREE})

    def select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        raise NotImplementedError

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        """Learn from the verdict on the tree this step's ``select`` returned (cut to the room left, if it was)."""


class Verifier(Component):
    """Runs the target once over root, tree and riders and accepts a path losslessly.

    Contract: under greedy settings the path follows the target's argmax and the bonus is
    the argmax after it; under sampling every committed token is distributed exactly as
    the target's processed distribution given the tokens before it. The cache is the
    core's: a verifier writes it through :meth:`Target.forward_tree` (or
    :meth:`Target.forward` with a mask of its own) and keeps the accepted path with
    :meth:`Target.commit`. After every step the engine checks that the cache holds
    every committed token but the last, at their positions, and blames the verifier if not.
    """

    consumes = frozenset({Capability.TREE})

    def verify(
        self,
        target: Target,
        tree: TokenTree,
        proposal: Proposal,
        ctx: StepContext,
        hidden_layers: Sequence[int],
    ) -> Verdict:
        """Verify ``tree`` (``N`` nodes, root first) and ``proposal.riders`` (``R``) in one forward.

        The verdict carries the target's logits ``[N, V]`` at the nodes, ``[R, V]`` at the
        riders, and ``hidden_layers`` at the root and accepted nodes ``[1 + len(path), D]``.
        """
        raise NotImplementedError


class Trainer:
    """A training recipe, run as ``specmix train NAME``.

    Registered as a class and built without arguments. Recipes must be resumable: a
    second run with the same output directory continues where the first stopped.
    """

    description: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the recipe's options to its ``specmix train NAME`` parser."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the recipe with the parsed options; the exit status is returned."""
        raise NotImplementedError


class Baseline:
    """Another implementation timed beside specmix's methods in ``specmix bench`` (registered by ``register_baselines``)."""

    def __call__(self, ids: list[int], max_new_tokens: int) -> Run:
        """Generate after the prompt ``ids``: the new tokens, the seconds it took and, if known, the target forwards."""
        raise NotImplementedError
