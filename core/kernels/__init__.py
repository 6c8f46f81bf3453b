"""Faster target forwards that compute the same outputs.

On CPU: matrix kernels chosen per weight shape and row count (:mod:`~specmix.kernels.row_kernels`),
grouped-query attention without copied key/value heads (:mod:`~specmix.kernels.grouped_attention`),
the LM head applied only to the rows a walk reads (:mod:`~specmix.kernels.node_logits`) and its
greedy argmax screened in float16 (:mod:`~specmix.kernels.screened_head`). On CUDA: static
shapes replayed as CUDA graphs (:mod:`~specmix.kernels.static_shapes`). The target applies
them to models specmix loads itself, or when asked, and never to a caller's model object.
"""
