"""The block-diffusion (DFlash-style) drafter: ``drafter`` (the ``diffusion`` drafter),
``network`` (its layers), ``weights/`` (drafters shipped for the default model) and
``training/`` (the loss and the ``specmix train diffusion`` recipe, which the drafter never
imports). ``plugin`` registers the drafter, the ``dflash`` and ``ddtree`` methods and the recipe."""
