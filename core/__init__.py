"""specmix: lossless speculative decoding in which every part is a plugin."""

from specmix.composition import Composition, Method
from specmix.cost import CostCurve
from specmix.engine import Decoder
from specmix.errors import (
    CompositionError,
    ConfigurationError,
    MalformedTreeError,
    PluginError,
    SpecmixError,
    UnknownComponentError,
)
from specmix.hookspecs import hookimpl
from specmix.interfaces import Drafter, Selector, TreeBuilder, Verifier
from specmix.registry import Registry
from specmix.settings import DecodeSettings
from specmix.target import Target
from specmix.tree import TokenTree
from specmix.values import Generation, Marginals, Proposal, Riders, Step, StepContext, StepStats, Verdict

__all__ = [
    "Composition", "CompositionError", "ConfigurationError", "CostCurve", "DecodeSettings", "Decoder", "Drafter",
    "Generation", "MalformedTreeError", "Marginals", "Method", "PluginError", "Proposal", "Registry", "Riders",
    "Selector", "SpecmixError", "Step", "StepContext", "StepStats", "Target", "TokenTree", "TreeBuilder",
    "UnknownComponentError", "Verdict", "Verifier", "hookimpl",
]
