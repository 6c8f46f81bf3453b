"""The ``best-first`` builder (DDTree): the most probable prefix-closed trees from per-position marginals."""

import heapq
from typing import cast

from specmix import Capability, ConfigurationError, Marginals, Proposal, StepContext, TokenTree, TreeBuilder


class BestFirstBuilder(TreeBuilder):
    """Pops nodes best first from a heap of rank tuples until ``nodes`` are out.

    A node at depth d with rank r takes the r-th token of position d's marginals; its
    score is the sum of its path's log-probabilities. Popping a node pushes its next
    sibling (rank r + 1) and its first child (depth d + 1, rank 0), so the result is the
    top-``nodes`` prefix-closed set by product probability, best first, each node
    carrying its draft log-probability for the selector.
    """

    consumes = frozenset({Capability.MARGINALS})
    produces = frozenset({Capability.TREE, Capability.LOGPROBS})

    def __init__(self, nodes: int = 64) -> None:
        if nodes < 0:
            raise ConfigurationError(f"nodes must be >= 0, got {nodes}")
        self.nodes = nodes

    def build(self, proposal: Proposal, ctx: StepContext) -> TokenTree:
        marginals = cast(Marginals, proposal.marginals)  # consumed, so always there
        depth = min(marginals.depth, ctx.max_depth)
        tokens, parents, logprobs = [ctx.root], [-1], [0.0]
        if depth <= 0 or self.nodes == 0:
            return TokenTree(tokens=tokens, parents=parents, vocab_size=ctx.vocab_size, logprobs=logprobs)
        ids, lp = marginals.ids[:depth].tolist(), marginals.logprobs[:depth].tolist()
        width = len(ids[0])
        heap = [(-lp[0][0], 0, 0, 0, 0.0)]  # (-score, position, rank, parent index, parent score)
        while heap and len(tokens) <= self.nodes:
            negative, position, rank, parent, parent_score = heapq.heappop(heap)
            index = len(tokens)
            tokens.append(ids[position][rank])
            parents.append(parent)
            logprobs.append(lp[position][rank])
            if rank + 1 < width:
                heapq.heappush(heap, (-(parent_score + lp[position][rank + 1]), position, rank + 1, parent, parent_score))
            if position + 1 < depth:
                heapq.heappush(heap, (negative - lp[position + 1][0], position + 1, 0, index, -negative))
        return TokenTree(tokens=tokens, parents=parents, vocab_size=ctx.vocab_size, logprobs=logprobs)

