"""Exceptions that reach users. Each names what went wrong and, where a plugin is involved, which one."""


class SpecmixError(Exception):
    """Base class of every error specmix raises on purpose."""


class ConfigurationError(SpecmixError, ValueError):
    """Bad input from the caller: settings, prompts, options."""


class MalformedTreeError(SpecmixError, ValueError):
    """A token tree, marginals or riders object violates its invariants."""


class UnknownComponentError(SpecmixError, LookupError):
    """A drafter, builder, selector, verifier or method name that no installed plugin registered."""


class CompositionError(SpecmixError):
    """Components that do not fit together: one consumes what no other produces."""


class DecoderBusyError(SpecmixError, RuntimeError):
    """A second generation started on a decoder whose first has not finished (one at a time per decoder)."""


class SpecmixWarning(UserWarning):
    """Something specmix worked around (a broken plugin skipped, a corrupt cache rebuilt) and wants you to know."""


class PluginError(SpecmixError):
    """An exception raised inside a plugin, re-raised with the plugin's and component's names.

    The original exception is kept as ``__cause__``.
    """

    def __init__(self, message: str, *, plugin: str, component: str):
        super().__init__(message)
        self.plugin = plugin
        self.component = component


def one_line(exc: BaseException) -> str:
    """An exception as its type and the first 300 characters of its message, on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
