"""Sizing: how much of a proposal is worth verifying.

The cost curve T(N) as a value (:mod:`~specmix.sizing.cost`) and its measurement on a
target (:mod:`~specmix.sizing.measure`); the reach selector that sizes trees by it
(:mod:`~specmix.sizing.selection`); the online estimates that feed it (calibration of
drafters' claims, lookup odds); and the merging of
several drafters' trees into one (:mod:`~specmix.sizing.mixing`). Plugins decide with
these; the engine only hands them the measured curve.
"""
