"""TAPS: a wide candidate pool (``pool_builder``, the ``pool`` builder) cut by a learned
path-acceptance scorer (``scorer``) in the ``learned`` selector (``selector``); ``weights/``
holds the scorers shipped for the default model and ``training/`` the traces, the loss and
the ``specmix train scorer`` recipe. ``plugin`` registers them and the ``taps`` method."""
