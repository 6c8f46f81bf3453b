"""Every hook is documented in the plugin guide and exercised here, through a plugin registered for one test."""

import argparse
import inspect
import json
from pathlib import Path

import pytest

from specmix import (
    FALLBACK_RANK,
    Capability,
    ConfigurationError,
    DecodeSettings,
    Drafter,
    Method,
    PluginError,
    Proposal,
    Registry,
    Selector,
    TokenTree,
    Trainer,
    TreeBuilder,
    hookimpl,
    hookspecs,
    load,
)
from specmix.errors import SpecmixWarning
from specmix.interfaces import Baseline
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.testing import reference_greedy, tiny_model
from specmix.values import Run

PLUGIN_GUIDE = Path(__file__).parents[1] / "docs" / "plugins.md"
HOOKS = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("register_"))


def test_every_hook_is_documented_in_the_plugin_guide_and_exercised_here():
    guide = PLUGIN_GUIDE.read_text()
    for name in HOOKS:
        assert f"`{name}" in guide, f"hook {name} is not documented in docs/plugins.md"
        assert callable(globals().get(f"test_hook_{name}")), f"hook {name} has no test_hook_{name} here"


def test_every_hook_is_typed():
    for name in HOOKS:
        annotation = inspect.signature(getattr(hookspecs, name)).parameters["register"].annotation
        assert annotation.startswith("Callable["), f"hook {name} does not say what register takes"


class Echo(Drafter):
    """Proposes the last committed token again."""

    produces = frozenset({Capability.TREE})

    def propose(self, ctx):
        return Proposal(tree=TokenTree.from_paths(ctx.root, [[ctx.root]], ctx.vocab_size))


class FirstChild(TreeBuilder):
    consumes = frozenset({Capability.TREE})

    def build(self, proposal, ctx):
        tree = proposal.tree
        return tree.subtree([0, *tree.children[0][:1]])


class RootOnly(Selector):
    def select(self, tree, proposal, ctx):
        return tree.subtree([0])


class CountingVerifier(TreeVerifier):
    calls = 0

    def verify(self, *args):
        CountingVerifier.calls += 1
        return super().verify(*args)


class EchoTrainer(Trainer):
    description = "writes its --word"

    def add_arguments(self, parser):
        parser.add_argument("--word", default="hi")

    def run(self, args):
        self.said = args.word
        return 0


class Replay(Baseline):
    """A baseline that answers every prompt with ``count`` sevens."""

    def __init__(self, model, tokenizer, settings, options):
        self.count = options.get("drafter", {}).get("count", 2)

    def __call__(self, ids, max_new_tokens):
        return Run([7] * min(self.count, max_new_tokens), 0.5, None)


class Everything:
    """One plugin object with every hook."""

    @hookimpl
    def register_drafters(self, register):
        register("echo", Echo)

    @hookimpl
    def register_tree_builders(self, register):
        register("first-child", FirstChild)

    @hookimpl
    def register_selectors(self, register):
        register("root-only", RootOnly)

    @hookimpl
    def register_verifiers(self, register):
        register("counting", CountingVerifier)

    @hookimpl
    def register_methods(self, register):
        register(Method(name="echo-method", drafter="echo", builder="first-child", selector="all", verifier="counting"))

    @hookimpl
    def register_trainers(self, register):
        register("echo", EchoTrainer)

    @hookimpl
    def register_baselines(self, register):
        register("replay", Replay)


@pytest.fixture(scope="module")
def everything():
    return Registry.load(extra_plugins=[Everything()])


def _greedy(decoder, prompt=(3, 4, 5), count=10):
    settings = DecodeSettings(max_new_tokens=count, stop_ids=())
    tokens = list(decoder.generate(list(prompt), settings).tokens)
    assert tokens == reference_greedy(decoder.target.model, prompt, settings)
    return decoder


def test_hook_register_drafters(everything):
    decoder = _greedy(load(tiny_model(), "vanilla", registry=everything, drafter="echo"))
    assert decoder.composition.drafter.plugin == "Everything"


def test_hook_register_tree_builders(everything):
    decoder = load(tiny_model(), "echo-method", registry=everything, builder="first-child", verifier="tree")
    assert decoder.composition.builder.name == "first-child"
    _greedy(decoder)


def test_hook_register_selectors(everything):
    decoder = _greedy(load(tiny_model(), "echo-method", registry=everything, selector="root-only"))
    assert all(step.tree_size == 1 for step in decoder.generate([3, 4, 5], DecodeSettings(max_new_tokens=4)).steps)


def test_hook_register_verifiers(everything):
    before = CountingVerifier.calls
    _greedy(load(tiny_model(), "vanilla", registry=everything, verifier="counting"), count=6)
    assert CountingVerifier.calls - before == 6


def test_hook_register_methods(everything):
    decoder = _greedy(load(tiny_model(), "echo-method", registry=everything))
    assert decoder.composition.label == "echo+first-child+all+counting"
    assert everything.get("method", "vanilla").factory.default == FALLBACK_RANK  # plain decoding, where nothing is above


class Unfit(Drafter):
    """A drafter trained for some other target: it refuses this one when attached."""

    produces = frozenset({Capability.TREE})

    def attach(self, target):
        raise ConfigurationError("no weights for this target")


class Broken(Unfit):
    def attach(self, target):
        raise RuntimeError("a bug")


def _offering(*methods):
    """A registry where each ``(rank, drafter)`` is a method ``mine<i>`` offered as default at that rank."""

    class Offers:
        @hookimpl
        def register_drafters(self, register):
            register("unfit", Unfit)
            register("broken", Broken)

        @hookimpl
        def register_methods(self, register):
            for index, (rank, drafter) in enumerate(methods):
                register(Method(name=f"mine{index}", drafter=drafter, builder="drafted", selector="all", verifier="tree",
                                default=rank))

    return Registry.load(extra_plugins=[Offers()])


def test_the_default_is_the_method_offered_at_the_highest_rank():
    registry = _offering((0, "none"), (50, "none"), (40, "unfit"))
    assert registry.default_methods()[:2] == ["mine1", "mine2"] and registry.default_method() == "mine1"
    assert load(tiny_model(), registry=registry).composition.label == "none+drafted+all+tree"
    with pytest.raises(ValueError):
        Method(name="bad", drafter="none", builder="drafted", selector="all", verifier="tree", default=-1)


def test_a_default_that_does_not_fit_the_target_gives_way_to_the_next_with_a_warning():
    registry = _offering((60, "unfit"), (50, "none"))
    with pytest.warns(SpecmixWarning, match="the default method 'mine0' does not run on this model .*no weights for "
                                            "this target.*; running 'mine1'"):
        decoder = load(tiny_model(), registry=registry)
    assert decoder.composition.label == "none+drafted+all+tree"
    with pytest.raises(PluginError, match="no weights"):  # named, it is not replaced
        load(tiny_model(), "mine0", registry=registry)
    with pytest.raises(PluginError, match="a bug"):  # a fault is not a misfit: it is raised
        load(tiny_model(), registry=_offering((60, "broken"), (50, "none")))


def test_two_default_methods_at_one_rank_are_refused_by_name():
    registry = _offering((50, "none"), (50, "none"))
    with pytest.raises(ConfigurationError, match="found 'mine0' \\(plugin 'Offers'\\), 'mine1' \\(plugin 'Offers'\\) "
                                                 "at rank 50"):
        load(tiny_model(), registry=registry)
    assert load(tiny_model(), "mine1", registry=registry).composition.label == "none+drafted+all+tree"

def test_hook_register_trainers(everything):
    trainer = everything.trainer("echo")
    parser = argparse.ArgumentParser()
    trainer.add_arguments(parser)
    assert trainer.run(parser.parse_args(["--word", "hello"])) == 0 and trainer.said == "hello"
    assert {"diffusion", "scorer"} <= set(everything.names("trainer"))


def test_a_trainer_must_be_a_trainer_class():
    class Loose:
        @hookimpl
        def register_trainers(self, register):
            register("loose", EchoTrainer())

    from specmix import PluginError

    with pytest.raises(PluginError, match="expected a name and a subclass of specmix.Trainer"):
        Registry.load(extra_plugins=[Loose()], strict=True)


def test_hook_register_baselines(everything, tmp_path):
    from specmix.bench.runner import run_bench

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"question_id": 1, "category": "a", "turns": ["Hi."]}) + "\n")
    report = run_bench(["hf", "replay[drafter.count=3]"], str(prompts), None, DecodeSettings(max_new_tokens=4),
                       out=tmp_path / "bench.json", registry=everything)
    row = report["methods"]["replay[drafter.count=3]"]
    assert row["tokens"] == 3 and row["seconds"] == 0.5 and row["tau"] is None
    assert "dflash-ref" in everything.names("baseline")
