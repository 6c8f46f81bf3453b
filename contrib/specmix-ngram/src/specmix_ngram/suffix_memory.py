"""A bounded memory of the target's earlier outputs in this process, indexed by n-gram (as SuffixDecoding's global tree)."""

from __future__ import annotations

from collections import OrderedDict, defaultdict

from specmix_ngram import matching


class SuffixMemory:
    """Earlier outputs, oldest dropped first once they hold more than ``capacity`` tokens.

    Each output is stored with a key of the prompt it answered (``key_of``), and a lookup
    skips the outputs of the prompt being answered now: a request never drafts from its own
    earlier answer (a repeated or warmed-up prompt would otherwise copy itself and flatter
    the benchmark).
    """

    def __init__(self, capacity: int, min_ngram: int, max_ngram: int):
        self.capacity, self.min_ngram, self.max_ngram = capacity, min_ngram, max_ngram
        self.outputs: OrderedDict[int, tuple[int, list[int]]] = OrderedDict()  # serial -> (prompt key, tokens)
        self.index: dict[tuple[int, ...], list[tuple[int, int]]] = defaultdict(list)  # n-gram -> (serial, follower)
        self.tokens, self.serial, self.stale = 0, 0, 0  # stale: index entries of forgotten outputs

    @staticmethod
    def key_of(prompt: tuple[int, ...]) -> int:
        return hash(prompt)

    def add(self, prompt_key: int, output: list[int]) -> None:
        if self.capacity <= 0 or len(output) < 2:
            return
        output = output[-self.capacity:]
        self.serial += 1
        self.outputs[self.serial] = (prompt_key, output)
        self.tokens += len(output)
        for end in range(1, len(output)):
            for n in range(self.min_ngram, min(self.max_ngram, end) + 1):
                self.index[tuple(output[end - n:end])].append((self.serial, end))
        while self.tokens > self.capacity:
            _, (_, dropped) = self.outputs.popitem(last=False)
            self.tokens -= len(dropped)
            self.stale += len(dropped)
        if self.stale > self.capacity:  # lookups skip forgotten outputs' entries; drop them once they add up
            self._prune()

    def _prune(self) -> None:
        kept = {key: [entry for entry in entries if entry[0] in self.outputs] for key, entries in self.index.items()}
        self.index = defaultdict(list, {key: entries for key, entries in kept.items() if entries})
        self.stale = 0

    def held(self, prompt_key: int) -> dict:
        """What a generation answering the prompt ``prompt_key`` can draft from: outputs and tokens, and how many are its own."""
        own = [tokens for key, tokens in self.outputs.values() if key == prompt_key]
        return {"outputs": len(self.outputs) - len(own), "tokens": self.tokens - sum(map(len, own)),
                "skipped_own": len(own)}

    def continuations(self, context: list[int], prompt_key: int, depth: int, limit: int):
        """The longest n-gram ending ``context`` that earlier outputs hold: ``(n, agreement, paths)``, most recent first.

        ``agreement`` is how far back the most recent occurrence agrees with the context
        (at least n, at most 8); ``paths`` are up to ``limit`` continuations of up to ``depth`` tokens.
        """
        if not self.outputs:
            return 0, 0, []
        for n in range(min(self.max_ngram, len(context)), self.min_ngram - 1, -1):
            paths, agreement = [], 0
            for serial, end in reversed(self.index.get(tuple(context[-n:]), ())):
                stored = self.outputs.get(serial)
                if stored is None or stored[0] == prompt_key:
                    continue
                tokens = stored[1]
                if not paths:
                    agreement = matching.agreement(tokens, end, context, n)
                paths.append(tokens[end:end + depth])
                if len(paths) == limit:
                    break
            if paths:
                return n, agreement, paths
        return 0, 0, []
