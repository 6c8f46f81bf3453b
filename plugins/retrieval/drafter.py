"""The ``corpus`` drafter: what followed the context's longest match in a corpus of the target's own earlier text."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from specmix import Capability, ConfigurationError, Drafter, Proposal, StepContext, Target, TokenTree, Verdict
from specmix.plugins.retrieval.candidates import GrowingMatch, Key, candidates
from specmix.plugins.retrieval.corpus import Corpus
from specmix.sizing.odds import ContinuationOdds
from specmix.values import HiddenStates

SHIPPED = Path(__file__).parent / "corpora"


class CorpusDrafter(Drafter):
    """Retrieval drafting (REST, SuffixDecoding's global tree): a small language model's text repeats across
    answers, so the longest suffix of the context that its earlier answers hold says what it is likely to write next.

    Each step finds the longest suffix of the context (up to ``longest`` tokens) in the
    corpus (carried on from the last step's match where the tokens since continue it) and
    proposes the trie of what followed it there, most frequent paths first (``nodes``
    nodes, ``depth`` deep). A node's score is the chance that the target takes
    it once its parent is reached, estimated per match length, depth, share of the
    parent's occurrences and how many those were: it starts from the rates measured on
    held-out answers when the corpus was made and learns from every verdict of the
    generation, so a selector can weigh the nodes against forward time.

    Options: ``corpus``, a directory made by ``specmix train corpus`` (default: the one
    shipped for this target); ``random_documents``: a corpus of that many random documents
    instead (losslessness never depends on the corpus, so tests use it).
    """

    produces = frozenset({Capability.TREE})
    calibrated = True  # its scores are acceptance odds learnt from verdicts
    test_options = {"random_documents": 64}

    def __init__(self, corpus: str | None = None, longest: int = 32, nodes: int = 16, depth: int = 8,
                 random_documents: int | None = None) -> None:
        if longest < 1 or nodes < 1 or depth < 1:
            raise ConfigurationError("longest, nodes and depth must be at least 1")
        self.corpus_option, self.longest, self.nodes, self.depth = corpus, longest, nodes, depth
        self.random_documents = random_documents

    def attach(self, target: Target) -> None:
        if self.random_documents:
            self.corpus = Corpus.random(target.vocab_size, target.fingerprint, self.random_documents)
        else:
            self.corpus = Corpus.find(self.corpus_option, target.fingerprint, SHIPPED)
        self.odds = ContinuationOdds(prior=self.corpus.overall,
                                     priors=self.corpus.priors)

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        self.tokens = prompt.tolist()
        self.matching = GrowingMatch(self.corpus.store, self.longest)
        self.odds.reset()
        self.keys: dict[tuple[int, ...], Key | None] = {}  # the proposed paths (below the root) and their odds keys

    def propose(self, ctx: StepContext) -> Proposal:
        found = candidates(self.corpus.store, self.matching.of(self.tokens), self.nodes, min(self.depth, ctx.max_depth))
        if found is None or found.size == 1:
            self.keys = {}
            return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size))
        self.keys = dict(zip(found.paths[1:], found.keys[1:]))
        logprobs = [0.0] + [math.log(self.odds.probability(key)) for key in found.keys[1:]]
        return Proposal(tree=TokenTree(tokens=(ctx.root, *found.tokens[1:]), parents=found.parents,
                                       vocab_size=ctx.vocab_size, logprobs=logprobs))

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        self._learn(verdict)
        self.keys = {}
        self.tokens.extend(verdict.committed)

    def _learn(self, verdict: Verdict) -> None:
        """Count every verified node of ours whose parent the walk reached, taken if the walk went on through it."""
        tree, accepted = verdict.tree, verdict.tokens
        for depth, node in enumerate((0, *verdict.path)):
            prefix = accepted[:depth]
            for child in tree.children[node]:
                key = self.keys.get(prefix + (tree.token_list[child],))
                if key is not None:
                    self.odds.count(key, depth < len(accepted) and accepted[depth] == tree.token_list[child])
