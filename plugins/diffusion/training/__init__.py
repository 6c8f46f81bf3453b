"""Training a block-diffusion drafter: ``loss`` (blocks, loss, optimisation) and ``recipe`` (``specmix train diffusion``)."""
