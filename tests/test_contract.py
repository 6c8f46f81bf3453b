"""The engine checks every component against what it declared, and the cache after every step."""

import pytest
import torch

from specmix import (
    Capability,
    Decoder,
    DecodeSettings,
    Drafter,
    Marginals,
    PluginError,
    Proposal,
    Registry,
    TokenTree,
    TreeBuilder,
    Verdict,
    hookimpl,
)
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.testing import check_greedy_identical, kit_registry, tiny_model
from specmix.testing.properties import GreedyCase


class HollowDrafter(Drafter):
    """Declares marginals it never gives."""

    produces = frozenset({Capability.MARGINALS})

    def propose(self, ctx):
        return Proposal()


class OffRootDrafter(Drafter):
    """Proposes a tree rooted at the wrong token."""

    produces = frozenset({Capability.TREE})

    def propose(self, ctx):
        return Proposal(tree=TokenTree.root_only((ctx.root + 1) % ctx.vocab_size, ctx.vocab_size))


class UnscoredBuilder(TreeBuilder):
    """Declares log-probabilities on a tree without them."""

    consumes = frozenset({Capability.MARGINALS})
    produces = frozenset({Capability.TREE, Capability.LOGPROBS})

    def build(self, proposal, ctx):
        return TokenTree.root_only(ctx.root, ctx.vocab_size)


class MisplacedVerifier(TreeVerifier):
    """Keeps as many nodes as it accepted, but where it accepted one it keeps that node's sibling instead."""

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        out = target.forward_tree(tree, proposal.riders, hidden_layers)
        path, bonus = self.accept(tree, out.logits, ctx)
        siblings = [child for child in tree.children[0] if child not in path]
        target.commit(siblings[:1] if len(path) == 1 and siblings else path)
        return Verdict(tree=tree, path=tuple(path), bonus=bonus, logits=out.logits, rider_logits=out.rider_logits,
                       hidden=out.hidden_along(path))


class ForgetfulVerifier(TreeVerifier):
    """Keeps the accepted path but its last node."""

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        out = target.forward_tree(tree, proposal.riders, hidden_layers)
        path, bonus = self.accept(tree, out.logits, ctx)
        target.commit(path[:-1])
        return Verdict(tree=tree, path=tuple(path), bonus=bonus, logits=out.logits, rider_logits=out.rider_logits,
                       hidden=out.hidden_along(path))


class SilentRiderVerifier(TreeVerifier):
    """Declares rider logits but hands none back."""

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        verdict = super().verify(target, tree, proposal, ctx, hidden_layers)
        return Verdict(tree=tree, path=verdict.path, bonus=verdict.bonus, logits=verdict.logits, hidden=verdict.hidden)


class FaultyPlugin:
    @hookimpl
    def register_drafters(self, register):
        register("hollow", HollowDrafter)
        register("off-root", OffRootDrafter)

    @hookimpl
    def register_tree_builders(self, register):
        register("unscored", UnscoredBuilder)

    @hookimpl
    def register_verifiers(self, register):
        register("misplaced", MisplacedVerifier)
        register("forgetful", ForgetfulVerifier)
        register("silent-riders", SilentRiderVerifier)


@pytest.fixture(scope="module")
def faulty():
    return kit_registry([FaultyPlugin()])


def _decode(registry, prompt=(1, 2, 3), tokens=6, **names):
    decoder = Decoder(tiny_model(), registry.compose(**names))
    return decoder.generate(list(prompt), DecodeSettings(max_new_tokens=tokens, stop_ids=()))


def test_a_drafter_that_leaves_out_what_it_declares_is_named(faulty):
    with pytest.raises(PluginError, match="drafter 'hollow' from plugin 'FaultyPlugin' declares it produces 'marginals'"):
        _decode(faulty, drafter="hollow", builder="chain", selector="all", verifier="tree")


def test_a_drafted_tree_with_the_wrong_root_is_blamed_on_its_drafter(faulty):
    with pytest.raises(PluginError, match="drafter 'off-root' .* proposed a tree rooted at token 4"):
        _decode(faulty, drafter="off-root", builder="drafted", selector="all", verifier="tree")


def test_a_builder_that_leaves_out_declared_logprobs_is_named(faulty):
    with pytest.raises(PluginError, match="builder 'unscored' .* declares it produces 'logprobs'"):
        _decode(faulty, drafter="kit-random-marginals", builder="unscored", selector="all", verifier="tree")


@pytest.mark.parametrize("verifier", ["misplaced", "forgetful"])
def test_a_verifier_that_leaves_the_cache_wrong_is_named(faulty, verifier):
    case = GreedyCase(family="llama", model_seed=0, prompt=(5, 6, 7, 8), settings=DecodeSettings(max_new_tokens=30),
                      drafter_seed=0)
    names = dict(drafter="kit-random-tree", builder="drafted", selector="all", verifier=verifier)
    with pytest.raises(PluginError, match=f"verifier '{verifier}' .* left the cache holding"):
        check_greedy_identical(faulty, names, case, check_cache=False)


def test_a_verifier_that_drops_rider_logits_it_declares_is_named(faulty):
    with pytest.raises(PluginError, match="verifier 'silent-riders' .* declares 'rider-logits'"):
        _decode(faulty, tokens=20, drafter="kit-riders", builder="drafted", selector="all", verifier="silent-riders")


def test_an_unknown_capability_is_refused_when_registered():
    class Typo(Drafter):
        produces = frozenset({"margnals"})

    class TypoPlugin:
        @hookimpl
        def register_drafters(self, register):
            register("typo", Typo)

    with pytest.raises(PluginError, match="plugin 'TypoPlugin' has drafter 'typo' whose produces names an unknown "
                                          "capability 'margnals'"):
        Registry.load(extra_plugins=[TypoPlugin()], strict=True)


def test_empty_proposals_satisfy_their_declarations(registry):
    """Marginals of depth 0 and no riders are what a drafter with nothing to say returns."""
    empty = Marginals(ids=torch.zeros(0, 3, dtype=torch.long), logprobs=torch.zeros(0, 3, dtype=torch.float64),
                      vocab_size=32)
    assert Proposal(marginals=empty).marginals.depth == 0
    generation = _decode(registry, tokens=12, drafter="kit-riders", builder="drafted", selector="all", verifier="tree")
    assert len(generation.tokens) == 12
