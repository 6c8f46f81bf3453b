"""The ``pool`` builder (TAPS): a top-K lattice over per-position marginals, with a beam per depth."""

from specmix import Capability, ConfigurationError, TokenTree, TreeBuilder


class PoolBuilder(TreeBuilder):
    """Depth by depth, every kept node of the previous depth is extended by the ``top_k``
    tokens of the next position; the ``beam`` best extensions by path log-probability are
    kept. Building stops at ``nodes`` nodes below the root or when the marginals end.

    Unlike ``best-first``, the pool is wide at every depth, so a selector that scores
    paths with more than the draft's product (the ``learned`` selector) has deep,
    unlikely-looking branches to choose from.
    """

    consumes = frozenset({Capability.MARGINALS})
    produces = frozenset({Capability.TREE, Capability.LOGPROBS})

    def __init__(self, top_k: int = 4, beam: int = 8, nodes: int = 64):
        if top_k < 1 or beam < 1 or nodes < 0:
            raise ConfigurationError(f"pool needs top_k >= 1, beam >= 1 and nodes >= 0; got {top_k}, {beam}, {nodes}")
        self.top_k, self.beam, self.nodes = top_k, beam, nodes

    def build(self, proposal, ctx):
        marginals = proposal.marginals
        depth = min(marginals.depth, ctx.max_depth)
        tokens, parents, logprobs = [ctx.root], [-1], [0.0]
        ids, lp = ([], []) if depth == 0 else (marginals.ids[:depth].tolist(), marginals.logprobs[:depth].tolist())
        frontier = [(0, 0.0)]  # (node index, path log-probability)
        for position in range(depth):
            width = min(self.top_k, len(ids[position]))
            extensions = sorted(((score + lp[position][rank], node, rank) for node, score in frontier for rank in range(width)),
                                key=lambda item: -item[0])
            room = self.nodes - (len(tokens) - 1)
            frontier = []
            for score, node, rank in sorted(extensions[: min(self.beam, room)], key=lambda item: (item[1], item[2])):
                frontier.append((len(tokens), score))
                tokens.append(ids[position][rank])
                parents.append(node)
                logprobs.append(lp[position][rank])
            if not frontier:
                break
        return TokenTree(tokens=tokens, parents=parents, vocab_size=ctx.vocab_size, logprobs=logprobs)

