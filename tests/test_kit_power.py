"""The kit must catch broken verifiers: a lossless property that cannot fail proves nothing."""

import pytest
from hypothesis import given

from specmix import DecodeSettings, hookimpl
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.testing import check_greedy_identical, check_sampling_distribution, kit_registry
from specmix.testing.strategies import greedy_cases, kit_settings
from specmix.testing.suite import SAMPLING


class OverEagerVerifier(TreeVerifier):
    """Accepts one token too many: where the greedy walk stops, it takes the first child anyway."""

    def accept(self, tree, logits, ctx):
        path, bonus = super().accept(tree, logits, ctx)
        children = tree.children[path[-1] if path else 0]
        if not children:
            return path, bonus
        return [*path, children[0]], int(logits[children[0]].argmax())


class ArgmaxFallbackVerifier(TreeVerifier):
    """The flaw of PTD's reference code: when sampling rejects every child, it emits the argmax."""

    def accept(self, tree, logits, ctx):
        path, bonus = super().accept(tree, logits, ctx)
        node = path[-1] if path else 0
        if ctx.settings.greedy or not tree.children[node]:
            return path, bonus
        return path, int(logits[node].argmax())


class BrokenVerifiers:
    @hookimpl
    def register_verifiers(self, register):
        register("overeager", OverEagerVerifier)
        register("argmax-fallback", ArgmaxFallbackVerifier)


BROKEN = kit_registry([BrokenVerifiers()])


def test_greedy_property_catches_a_verifier_that_accepts_one_token_too_many():
    names = dict(drafter="kit-random-tree", builder="drafted", selector="all", verifier="overeager")

    @given(case=greedy_cases())
    @kit_settings()
    def property_(case):
        check_greedy_identical(BROKEN, names, case)

    with pytest.raises(AssertionError, match="the target alone gives"):
        property_()


def test_sampling_property_catches_an_argmax_fallback():
    names = dict(drafter="kit-random-tree", builder="drafted", selector="all", verifier="argmax-fallback")
    with pytest.raises(AssertionError, match="chi-square"):
        check_sampling_distribution(BROKEN, names, DecodeSettings(temperature=1.0), samples=800)


@pytest.mark.parametrize("settings", SAMPLING)
def test_at_the_suites_sample_count_every_sampling_setting_catches_an_argmax_fallback(settings):
    """The repository's suites run 300 samples per chi-square test; the flaw is caught there by a wide margin."""
    names = dict(drafter="kit-random-tree", builder="drafted", selector="all", verifier="argmax-fallback")
    with pytest.raises(AssertionError, match="chi-square p = [0-9.]+e-(1[0-9]|[2-9][0-9])"):
        check_sampling_distribution(BROKEN, names, settings, samples=300)


def test_sampling_property_passes_the_real_verifier_on_the_same_case():
    names = dict(drafter="kit-random-tree", builder="drafted", selector="all", verifier="tree")
    assert check_sampling_distribution(BROKEN, names, DecodeSettings(temperature=1.0), samples=800) > 1e-4
