from types import SimpleNamespace

import attrs

from specmix import CostCurve, Decoder, DecodeSettings, Registry
from specmix.bench.runner import _specmix_runner, _stepped
from specmix.testing import tiny_model
from specmix.values import Step, StepStats

PROMPT = [3, 14, 15, 9, 2, 6] * 3
SETTINGS = DecodeSettings(max_new_tokens=24, stop_ids=())
CURVE = CostCurve(sizes=(1, 8), seconds=(0.05, 0.06))


def test_stepped_generations_are_those_each_decoder_writes_alone():
    model, registry = tiny_model(), Registry.load()

    def fresh():  # drafters learn across generations, so each way starts from new ones
        return {name: Decoder(model, registry.compose(name), cost_curve=CURVE) for name in ("vanilla", "ptd", "ngram")}

    together = _stepped(fresh(), PROMPT, SETTINGS)
    for name, decoder in fresh().items():
        alone = _specmix_runner(decoder, SETTINGS)(PROMPT, SETTINGS.max_new_tokens)
        assert together[name].tokens == alone.tokens and len(alone.tokens) == 24
        assert attrs.evolve(together[name], seconds=0.0, draft_s=0.0) == attrs.evolve(alone, seconds=0.0, draft_s=0.0)
    assert together["ptd"].steps < together["vanilla"].steps == 24  # so the shorter one ran out first


class Logged:
    """A decoder stand-in whose generation is ``count`` one-token steps, logging each step it takes."""

    def __init__(self, name, count, log):
        self.name, self.count, self.log = name, count, log
        self.composition = SimpleNamespace(drafters=())

    def stream(self, ids, settings):
        for index in range(self.count):
            self.log.append((self.name, index))
            yield Step((index,), StepStats(step=index, tree_size=1, riders=0, accepted=0, committed=1, draft_s=0.0,
                                           build_s=0.0, select_s=0.0, verify_s=0.0, observe_s=0.0))


def test_stepped_decoders_take_a_step_each_in_turn_until_each_is_done():
    log = []
    runs = _stepped({"a": Logged("a", 3, log), "b": Logged("b", 1, log), "c": Logged("c", 2, log)}, [1], SETTINGS)
    assert log == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2)]
    assert {name: run.tokens for name, run in runs.items()} == {"a": (0, 1, 2), "b": (0,), "c": (0, 1)}
