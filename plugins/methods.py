"""Named presets of built-in components."""

from specmix import Method, hookimpl


@hookimpl
def register_methods(register):
    register(Method(
        name="vanilla",
        drafter="none",
        builder="drafted",
        selector="all",
        verifier="tree",
        description="One token per target forward through the full engine: the baseline for overhead.",
    ))
