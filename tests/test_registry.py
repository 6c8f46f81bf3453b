import inspect

import pytest

from specmix import (
    CompositionError,
    ConfigurationError,
    Decoder,
    Drafter,
    Method,
    PluginError,
    Registry,
    UnknownComponentError,
    hookimpl,
    hookspecs,
)
from specmix.testing import kit_registry, tiny_model

BUILTINS = {
    "drafter": {"none"},
    "builder": {"chain", "drafted"},
    "selector": {"all", "budget"},
    "verifier": {"tree"},
    "method": {"vanilla"},
}


def test_builtins_arrive_through_entry_points_with_their_distribution():
    registry = Registry.load()
    for kind, names in BUILTINS.items():
        assert names <= set(registry.names(kind))
    infos = {info.name: info for info in registry.plugins()}
    assert infos["basic"].distribution == "specmix"
    assert infos["basic"].version
    assert ("verifier", "tree") in [(r.kind, r.name) for r in infos["basic"].registrations]
    assert {"basic", "ptd", "diffusion", "taps"} <= set(infos)  # one entry point per family


def test_every_hook_is_documented_and_registers_something():
    registry = Registry.load()
    specs = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("register_")]
    assert sorted(specs) == sorted(
        ["register_drafters", "register_tree_builders", "register_selectors", "register_verifiers", "register_methods",
         "register_trainers", "register_baselines"]
    )
    for name in specs:
        assert getattr(hookspecs, name).__doc__, f"hook {name} has no docstring"
    assert all(registry.names(kind) for kind in (*BUILTINS, "trainer", "baseline"))


def test_unknown_names_suggest_the_closest_installed_one():
    with pytest.raises(UnknownComponentError, match="no builder named 'chian'.*Did you mean 'chain'"):
        Registry.load().compose(drafter="none", builder="chian", selector="all", verifier="tree")
    with pytest.raises(UnknownComponentError, match="no method named"):
        Registry.load().compose("warp-speed")


def test_a_mismatch_names_both_components_and_what_each_needs(registry):
    with pytest.raises(CompositionError) as error:
        registry.compose(drafter="kit-random-tree", builder="chain", selector="all", verifier="tree")
    message = str(error.value)
    assert "builder 'chain' needs ['marginals']" in message
    assert "drafter 'kit-random-tree' produces ['tree']" in message


class DeafVerifierPlugin:
    """A verifier that produces no hidden states or rider logits."""

    @hookimpl
    def register_verifiers(self, register):
        from specmix.plugins.basic.tree_verifier import TreeVerifier

        class Deaf(TreeVerifier):
            produces = frozenset()

        register("deaf", Deaf)


def test_a_drafter_is_checked_against_the_verifier_of_the_previous_step():
    registry = kit_registry([DeafVerifierPlugin()])
    with pytest.raises(CompositionError, match="drafter 'kit-features' needs \\['hidden-states'\\].*verifier 'deaf'"):
        registry.compose(drafter="kit-features", builder="chain", selector="all", verifier="deaf")


def test_budget_without_a_fixed_size_needs_the_cost_curve_from_the_engine(registry):
    composition = registry.compose(drafter="none", builder="drafted", selector="budget", verifier="tree")
    assert composition.needs_cost_curve
    fixed = registry.compose(drafter="none", builder="drafted", selector="budget", verifier="tree",
                             options={"selector": {"budget": 4}})
    assert not fixed.needs_cost_curve


def test_options_are_checked_against_the_component(registry):
    with pytest.raises(ConfigurationError, match="does not accept options \\['depth'\\]"):
        registry.compose("vanilla", options={"selector": {"depth": 3}})
    with pytest.raises(ConfigurationError, match="unknown kind"):
        registry.compose("vanilla", options={"planner": {}})
    with pytest.raises(PluginError, match="budget must be"):
        registry.compose(drafter="none", builder="drafted", selector="budget", verifier="tree",
                         options={"selector": {"budget": -1}})


@pytest.mark.parametrize("raw, value", [("8", 8), ("0.5", 0.5), ("null", None), ("None", None), ("true", True),
                                        ("False", False), ("[1, 2]", [1, 2]), ("best-first", "best-first")])
def test_option_values_read_as_json_or_python_constants_or_text(raw, value):
    from specmix.options import parse_assignment

    assert parse_assignment(f"drafter.key={raw}") == ("drafter", "key", value)


class ExplodingDrafter(Drafter):
    produces = frozenset({"tree"})

    def propose(self, ctx):
        raise RuntimeError("boom")


class ExplodingPlugin:
    @hookimpl
    def register_drafters(self, register):
        register("exploding", ExplodingDrafter)

    @hookimpl
    def register_methods(self, register):
        register(Method(name="explode", drafter="exploding", builder="drafted", selector="all", verifier="tree"))


def test_an_exception_inside_a_plugin_reaches_the_user_with_its_name():
    registry = Registry.load(extra_plugins=[ExplodingPlugin()])
    decoder = Decoder(tiny_model(), registry.compose("explode"))
    with pytest.raises(PluginError, match="drafter 'exploding' from plugin 'ExplodingPlugin' failed in propose.*boom") as error:
        decoder.generate([1, 2, 3])
    assert error.value.plugin == "ExplodingPlugin"
    assert isinstance(error.value.__cause__, RuntimeError)


class RootlessBuilderPlugin:
    @hookimpl
    def register_tree_builders(self, register):
        from specmix import TokenTree, TreeBuilder

        class Rootless(TreeBuilder):
            def build(self, proposal, ctx):
                return TokenTree.root_only((ctx.root + 1) % ctx.vocab_size, ctx.vocab_size)

        register("rootless", Rootless)


def test_a_tree_with_the_wrong_root_is_blamed_on_its_builder():
    registry = Registry.load(extra_plugins=[RootlessBuilderPlugin()])
    decoder = Decoder(tiny_model(), registry.compose(drafter="none", builder="rootless", selector="all", verifier="tree"))
    with pytest.raises(PluginError, match="builder 'rootless' .* rooted at token"):
        decoder.generate([1, 2, 3])


def test_registration_errors_name_the_plugin():
    class Failing:
        @hookimpl
        def register_selectors(self, register):
            raise ValueError("bad config")

    with pytest.raises(PluginError, match="plugin 'Failing' failed in register_selectors.*bad config"):
        Registry.load(extra_plugins=[Failing()], strict=True)

    class NotAComponent:
        @hookimpl
        def register_selectors(self, register):
            register("odd", dict)

    with pytest.raises(PluginError, match="expected a subclass of Selector"):
        Registry.load(extra_plugins=[NotAComponent()], strict=True)


def test_two_plugins_claiming_one_name_are_both_named():
    class Impostor:
        @hookimpl
        def register_tree_builders(self, register):
            from specmix.plugins.basic.chain_builder import ChainBuilder

            register("chain", ChainBuilder)

    with pytest.raises(PluginError, match="plugin 'Impostor' registers builder 'chain', which plugin 'basic' registered first"):
        Registry.load(extra_plugins=[Impostor()], strict=True)


def test_a_misspelt_hook_fails_loudly():
    class Typo:
        @hookimpl
        def register_drafter(self, register):
            pass

    with pytest.raises(PluginError, match="matches no hook"):
        Registry.load(extra_plugins=[Typo()], strict=True)


def test_plugins_can_be_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("SPECMIX_DISABLE_PLUGINS", "taps, ptd")
    registry = Registry.load()
    assert "learned" not in registry.names("selector")
    assert "ptd" not in registry.names("method")
    assert {info.name: info.status for info in registry.plugins()}["taps"] == "disabled"


def test_a_method_with_explicit_overrides_keeps_the_rest(registry):
    composition = registry.compose("vanilla", selector="budget", options={"selector": {"budget": 2}})
    assert composition.label == "none+drafted+budget+tree"
    assert composition.selector.component.budget == 2
