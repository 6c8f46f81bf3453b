"""The kit must catch broken verifiers: a lossless property that cannot fail proves nothing."""

import copy

import pytest
import torch
from hypothesis import given

from specmix import DecodeSettings, hookimpl
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.testing import check_greedy_identical, check_sampling_distribution, kit_registry, reference_greedy, tiny_model
from specmix.testing.properties import assert_parting_at_a_rounding_tie
from specmix.testing.reference import next_logits
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


def _tied(dtype):
    """A tiny model whose LM head scores its first greedy choice after (2, 3) and another token alike; the
    model, its greedy output (which takes one of the two) and the other of the two."""
    model = copy.deepcopy(tiny_model("llama", seed=3)).to(dtype)
    with torch.no_grad():
        first = int(next_logits(model, [2, 3]).argmax())
        twin = (first + 1) % model.config.vocab_size
        head = model.get_output_embeddings().weight
        head[twin] = head[first]
    expected = reference_greedy(model, [2, 3], DecodeSettings(max_new_tokens=4, stop_ids=()))
    return model, expected, first + twin - expected[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_low_precision_output_may_part_at_a_rounding_tie_and_nowhere_else(dtype):
    model, expected, other = _tied(dtype)
    assert_parting_at_a_rounding_tie(model, [2, 3], [other, 9, 9, 9], expected, "tied")  # either of a tie is right
    far = int(next_logits(model, [2, 3]).argmin())
    with pytest.raises(AssertionError, match=r"they part at token 0, where the target prefers its own by"):
        assert_parting_at_a_rounding_tie(model, [2, 3], [far, 9, 9, 9], expected, "wrong")
    far_later = int(next_logits(model, [2, 3, expected[0]]).argmin())
    with pytest.raises(AssertionError, match=r"they part at token 1, where the target prefers its own by"):
        assert_parting_at_a_rounding_tie(model, [2, 3], [expected[0], far_later, 9, 9], expected, "wrong later")
    with pytest.raises(AssertionError, match="the target alone gives"):  # stopping early is never a tie
        assert_parting_at_a_rounding_tie(model, [2, 3], expected[:2], expected, "short")


def test_in_float64_any_parting_fails_even_at_a_tie():
    model, expected, other = _tied(torch.float64)
    with pytest.raises(AssertionError, match="the target alone gives"):
        assert_parting_at_a_rounding_tie(model, [2, 3], [other, *expected[1:]], expected, "tied")
