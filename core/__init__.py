"""specmix: lossless speculative decoding in which every part is a plugin.

The import package ``specmix`` is the source folder ``core/``: ``specmix.engine`` is
``core/engine.py``, ``specmix.testing`` is ``core/testing/``. The built-in plugins,
``specmix.plugins``, are the folder ``plugins/`` (one subpackage per method family).
Start with :func:`load` (names in, a decoder out), the interfaces in
:mod:`specmix.interfaces` and the hooks in :mod:`specmix.hookspecs`.
"""

from specmix.api import load
from specmix.capabilities import Capability
from specmix.composition import FALLBACK_RANK, Composition, Method
from specmix.engine import Decoder
from specmix.errors import (
    CompositionError,
    ConfigurationError,
    MalformedTreeError,
    PluginError,
    SpecmixError,
    SpecmixWarning,
    UnknownComponentError,
)
from specmix.hookspecs import hookimpl
from specmix.interfaces import Drafter, Selector, Trainer, TreeBuilder, Verifier
from specmix.registry import Registry
from specmix.settings import DecodeSettings
from specmix.sizing.cost import CostCurve
from specmix.sizing.selection import ReachSelector
from specmix.target import Target
from specmix.tree import TokenTree
from specmix.values import Generation, Marginals, Proposal, Riders, Step, StepContext, StepStats, Verdict

__all__ = [
    "FALLBACK_RANK", "Capability", "Composition", "CompositionError", "ConfigurationError", "CostCurve",
    "DecodeSettings", "Decoder", "Drafter", "Generation", "MalformedTreeError", "Marginals", "Method", "PluginError",
    "Proposal", "ReachSelector", "Registry", "Riders", "Selector", "SpecmixError", "SpecmixWarning", "Step",
    "StepContext", "StepStats", "Target", "TokenTree", "Trainer", "TreeBuilder", "UnknownComponentError", "Verdict",
    "Verifier", "hookimpl", "load",
]
