"""The n-gram trie drafter: matches in the context and in the target's earlier outputs."""

from __future__ import annotations

import math
from collections import defaultdict

from specmix import Capability, ConfigurationError, Drafter, Proposal, TokenTree
from specmix.sizing.odds import ContinuationOdds
from specmix_ngram import matching
from specmix_ngram.suffix_memory import SuffixMemory


class NgramDrafter(Drafter):
    """Proposes the trie of continuations after earlier occurrences of the context's last n-gram.

    An index from each n-gram (``min_ngram <= n <= max_ngram``) to the positions right
    after it grows with every committed token, so a lookup costs only its matches. The
    longest n with a match wins; its ``max_matches`` most recent occurrences each give a
    continuation of up to ``depth`` tokens.

    Edge probabilities are calibrated online, so a selector can weigh them against the
    cost of verifying: the chance that the target continues a node at all is estimated
    per match length, separately for the first token and for deeper ones, from which
    verified nodes this generation did continue (a Beta prior with mean ``prior`` and
    weight ``prior_weight``); the share of continuations through each child splits it.
    The match length is how far back the context agrees with the most recent occurrence
    (1, 2, 3, 4-7 or 8+ tokens), so a long match is tried on its own evidence. Below the
    first token it grows by the tokens of the continuation above the node: the target
    reaches a node only by taking them, and then the match is that much longer.

    Across generations the drafter remembers the target's outputs (up to ``remember``
    tokens, oldest forgotten first; 0 for none), as SuffixDecoding's global tree does: when
    an earlier output holds a longer match than the context, its continuations are
    proposed instead (on a tie, after the context's), with odds of their own. An output is
    never drafted from while its own prompt is being answered again.
    """

    produces = frozenset({Capability.TREE})
    calibrated = True  # its odds are learnt from verdicts: a mix takes them as they are

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, depth: int = 10, max_matches: int = 8,
                 prior: float = 0.5, prior_weight: float = 2.0, remember: int = 65536):
        if not 1 <= min_ngram <= max_ngram:
            raise ConfigurationError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}")
        if depth < 1 or max_matches < 1:
            raise ConfigurationError("depth and max_matches must be at least 1")
        if remember < 0:
            raise ConfigurationError(f"remember is a number of tokens, 0 or more; got {remember}")
        self.max_ngram, self.min_ngram, self.depth, self.max_matches = max_ngram, min_ngram, depth, max_matches
        self.odds = ContinuationOdds(prior, prior_weight)  # keyed by (source, match length, deeper)
        self.earlier = SuffixMemory(remember, min_ngram, max_ngram)
        self.prompt: tuple[int, ...] | None = None

    def start(self, prompt, hidden):
        if self.prompt is not None:  # the generation before this one is over: remember what it wrote
            self.earlier.add(self.prompt_key, self.tokens[len(self.prompt):])
        self.prompt = tuple(prompt.tolist())
        self.prompt_key = SuffixMemory.key_of(self.prompt)
        self.tokens: list[int] = []
        self.index: dict[tuple[int, ...], list[int]] = defaultdict(list)
        self.odds.reset()
        self.matched = None
        self._extend(list(self.prompt))

    def carried(self) -> dict:
        return self.earlier.held(self.prompt_key)

    def _extend(self, new: list[int]) -> None:
        """Append tokens; index every n-gram that now ends before the last token (its follower is known)."""
        tokens = self.tokens
        for token in new:
            tokens.append(token)
            end = len(tokens) - 1  # the n-grams ending at end-1 are now followed by tokens[end]
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end - n >= 0:
                    self.index[tuple(tokens[end - n:end])].append(end)

    def _in_context(self) -> tuple[int, int, list[list[int]]]:
        """The longest n-gram ending the context that occurs before: ``(n, agreement, paths)``, most recent first."""
        tokens = self.tokens
        for n in range(min(self.max_ngram, len(tokens)), self.min_ngram - 1, -1):
            starts = self.index.get(tuple(tokens[-n:]))
            if starts:
                paths = [tokens[s:s + self.depth] for s in reversed(starts[-self.max_matches:])]
                return n, matching.agreement(tokens, starts[-1], tokens, n), paths
        return 0, 0, []

    def propose(self, ctx):
        n, agreed, continuations = self._in_context()
        self.matched = None if not continuations else ("context", agreed)
        earlier_n, earlier_agreed, earlier = self.earlier.continuations(self.tokens, self.prompt_key, self.depth,
                                                                        self.max_matches)
        if earlier_n > n:
            continuations, self.matched = earlier, ("earlier", earlier_agreed)
        elif earlier_n == n:
            continuations += earlier[: self.max_matches - len(continuations)]
        if not continuations:
            return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size))
        trie = TokenTree.from_paths(ctx.root, continuations, ctx.vocab_size)
        through = [len(continuations)] + [0] * (trie.size - 1)
        for path in continuations:  # how many continuations pass through each node
            node = 0
            for token in path:
                node = next(c for c in trie.children[node] if trie.token_list[c] == token)
                through[node] += 1
        odds = [self.odds.logprob(self._key(reached)) for reached in range(max(trie.depth_list))]  # per depth below
        logprobs = [0.0] + [math.log(through[i] / through[trie.parent_list[i]]) + odds[trie.depth_list[i] - 1]
                            for i in range(1, trie.size)]
        return Proposal(tree=TokenTree(tokens=trie.tokens, parents=trie.parents, vocab_size=ctx.vocab_size,
                                       logprobs=logprobs))

    def _key(self, reached: int) -> tuple:
        """The odds that the target goes on below a node ``reached`` tokens into the match's continuation."""
        source, agreed = self.matched
        return source, matching.length_class(agreed + reached), reached > 0

    def observe(self, verdict, ctx):
        if self.matched:  # None too when a mix had this step go without the lookup
            self.odds.record(verdict, lambda node: self._key(verdict.tree.depth_list[node]))
        self.matched = None
        self._extend(list(verdict.committed))

