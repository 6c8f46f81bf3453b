"""Drafters of a mix that do not pay sit steps out, come back on trial, and output stays the target's own."""


import pytest

from specmix import Capability, DecodeSettings, Drafter, Proposal, TokenTree, hookimpl
from specmix.sizing.payoff import DrafterPayoff
from specmix.testing import kit_registry, reference_greedy, tiny_model
from specmix.testing.properties import make_decoder


def _run(payoff, steps, gains, costs, committed=2, seconds=0.1):
    """Steps of a payoff where drafter d gains ``gains[d]`` tokens at ``costs[d]`` seconds; which were asked, per step."""
    asked_log = []
    for _ in range(steps):
        asked = [payoff.ask(slot) for slot in range(payoff.slots)]
        asked_log.append(asked)
        payoff.record({slot: (asked[slot], gains[slot] if asked[slot] else 0.0, costs[slot]) for slot in range(payoff.slots)},
                      committed, seconds)
    return asked_log


def test_a_drafter_whose_tokens_cost_more_than_the_mix_rate_sits_out_and_is_retried():
    payoff = DrafterPayoff(2, revisit=5, trial=2, optimism=1.0)
    # The step runs at 2 / 0.1 = 20 tokens/s; drafter 0 adds 1 token per 10 ms (100/s), drafter 1 one per second.
    log = _run(payoff, 40, gains=[1.0, 0.1], costs=[0.01, 0.1])
    assert all(asked[0] for asked in log)
    second = [asked[1] for asked in log]
    assert second[:2] == [True, True] and not any(second[2:7])  # its trial, then five steps out
    assert second[7:9] == [True, True] and not any(second[9:14])  # retried on a new trial, out again
    assert sum(second) < len(second) / 2


def test_each_trial_that_fails_doubles_the_wait_before_the_next_and_paying_resets_it():
    payoff = DrafterPayoff(1, revisit=4, trial=1, longest=16)
    log = [asked[0] for asked in _run(payoff, 60, gains=[0.0], costs=[0.05])]
    trials = [i for i, asked in enumerate(log) if asked]
    assert trials[:5] == [0, 5, 14, 31, 48]  # out for 4, 8, 16 and (at most) 16 steps
    payoff.reset()  # a new generation: a trial first, and the earned wait is kept
    assert _run(payoff, 1, gains=[0.0], costs=[0.05])[0][0] and payoff.wait == [16]
    _run(payoff, 16, gains=[0.0], costs=[0.05])
    _run(payoff, 3, gains=[3.0], costs=[0.05])  # it pays (60 tokens/s against 20) after the trial
    assert payoff.wait == [4]


def test_a_drafter_that_pays_again_is_kept_after_its_trial():
    payoff = DrafterPayoff(1, revisit=4, trial=2, optimism=1.0)
    _run(payoff, 10, gains=[0.0], costs=[0.05])
    assert not payoff.ask(0)
    log = _run(payoff, 12, gains=[3.0], costs=[0.05])  # 60 tokens/s against the step's 20
    first_back = next(i for i, asked in enumerate(log) if asked[0])
    assert all(asked[0] for asked in log[first_back:])


def test_optimism_keeps_a_drafter_that_nearly_pays():
    strict, lenient = DrafterPayoff(1, trial=1, optimism=1.0), DrafterPayoff(1, trial=1, optimism=1.25)
    for payoff in (strict, lenient):
        _run(payoff, 6, gains=[0.18], costs=[0.01])  # 18 tokens/s against the step's 20
    assert not strict.ask(0) and lenient.ask(0)


def test_a_drafter_that_costs_next_to_nothing_is_always_asked():
    payoff = DrafterPayoff(1, trial=1, free=0.02)
    log = _run(payoff, 30, gains=[0.0], costs=[0.001])  # a lookup that finds nothing: 1 ms of a 100 ms step
    assert all(asked[0] for asked in log)
    payoff = DrafterPayoff(1, trial=1, free=0.0)
    assert not any(asked[0] for asked in _run(payoff, 30, gains=[0.0], costs=[0.001])[1:16])


@pytest.mark.parametrize("bad", [dict(slots=0), dict(slots=1, trial=0), dict(slots=1, optimism=0.5),
                                 dict(slots=1, free=1.0), dict(slots=1, revisit=16, longest=8)])
def test_a_payoff_refuses_settings_that_cannot_work(bad):
    with pytest.raises(ValueError):
        DrafterPayoff(**bad)


class _Counting(Drafter):
    """Proposes, after a slow pass, a token the target never takes (the vocabulary's last), counting its calls."""

    produces = frozenset({Capability.TREE})
    proposed = observed = 0
    clock = None  # the test's clock

    def propose(self, ctx):
        type(self).proposed += 1
        type(self).clock.advance(0.01)  # a pass that costs more than the tiny target's whole step
        paths = [[ctx.vocab_size - 1]] if ctx.max_depth else []
        return Proposal(tree=TokenTree.from_paths(ctx.root, paths, ctx.vocab_size))

    def observe(self, verdict, ctx):
        type(self).observed += 1


class _CountingPlugin:
    @hookimpl
    def register_drafters(self, register):
        register("never-right", _Counting)


@pytest.mark.parametrize("names", [
    {"drafter": "never-right", "builder": "drafted", "selector": "budget", "verifier": "tree"},
    {"drafter": "never-right+kit-random-tree", "builder": "drafted+drafted", "selector": "budget", "verifier": "tree"},
], ids=["alone", "in-a-mix"])
def test_a_drafter_that_never_pays_sits_out_and_still_observes_every_step(names, fake_time):
    _Counting.clock = fake_time
    registry = kit_registry([_CountingPlugin()])
    model = tiny_model("llama")
    decoder = make_decoder(registry, names, model, seed=1)
    settings = DecodeSettings(max_new_tokens=60, stop_ids=())
    _Counting.proposed = _Counting.observed = 0
    generation = decoder.generate([3, 4, 5], settings)
    assert list(generation.tokens) == reference_greedy(model, [3, 4, 5], settings)
    steps = len(generation.steps)
    assert _Counting.observed == steps and _Counting.proposed < steps / 2
    assert _Counting.proposed == sum(step.asked[0] for step in generation.steps)


def test_a_composition_that_verifies_everything_asks_every_drafter_every_step(registry):
    """Without the cost curve nothing prices a drafter, so none sits out (dflash verifies its whole block)."""
    model = tiny_model("llama")
    names = {"drafter": "kit-random-tree+kit-random-marginals", "builder": "drafted+chain", "selector": "all",
             "verifier": "tree"}
    generation = make_decoder(registry, names, model, seed=2).generate([3, 4, 5], DecodeSettings(max_new_tokens=30,
                                                                                                  stop_ids=()))
    assert all(step.asked == (True, True) for step in generation.steps)
