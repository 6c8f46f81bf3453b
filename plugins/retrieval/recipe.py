"""``specmix train corpus``: prompts → the target's own responses → a corpus, and the acceptance rates on held-out ones.

The responses are written into ``--out`` batch by batch and resumed when the command runs
again; the corpus is rebuilt from them in under a minute.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import cast

from specmix import Trainer
from specmix.plugins.retrieval.candidates import GrowingMatch, Key, candidates, coarse
from specmix.plugins.retrieval.corpus import Corpus, CorpusConfig
from specmix.plugins.retrieval.datastore import Datastore
from specmix.plugins.trained.prompts import CODE_TEMPLATES, COMPLETION_TEMPLATES, CORPUS_TEMPLATES, stored_prompts
from specmix.plugins.trained.recipes import add_common_arguments, logger, open_workspace
from specmix.plugins.trained.responses import generate_responses, read_responses
from specmix.target import fingerprint

_log = logger("corpus")
SHRINK = 8.0
"""How many observations a key's coarser rate is worth when a key's own are few."""


def shared_ending(prompts: Sequence[Sequence[int]]) -> int:
    """How many tokens every prompt ends with alike (the chat template's opening of an answer)."""
    shortest = min(len(prompt) for prompt in prompts)
    length = 0
    while length < shortest and len({prompt[len(prompt) - length - 1] for prompt in prompts}) == 1:
        length += 1
    return length


def documents(responses: Sequence[tuple[tuple[int, ...], int]]) -> tuple[list[tuple[int, ...]], int]:
    """Each response with the chat template's opening before it, so that an answer's first tokens have a match too;
    and how long that opening is."""
    opening = shared_ending([ids[:start] for ids, start in responses])
    return [ids[start - opening:] for ids, start in responses], opening


def split_held_out(texts: Sequence, count: int) -> tuple[list, list]:
    """``count`` texts spread evenly over ``texts`` (so every kind of prompt is in them) and the others."""
    every = max(len(texts) // max(count, 1), 1)
    held = set(range(0, every * count, every)) & set(range(len(texts)))
    return [t for i, t in enumerate(texts) if i not in held], [t for i, t in enumerate(texts) if i in held]


def taken_counts(store: Datastore, texts: Sequence[Sequence[int]], starts: Sequence[int], longest: int, nodes: int,
                 depth: int) -> dict[Key, list[int]]:
    """Per odds key, ``[taken, tried]`` over every position of ``texts`` from its start: each candidate whose parent
    the target's own text reaches is tried, and taken if the text goes on through it."""
    counts: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for text, start in zip(texts, starts):
        matching = GrowingMatch(store, longest)
        for position in range(max(start, 1), len(text)):
            found = candidates(store, matching.of(text[:position]), nodes, depth)
            if found is None:
                continue
            reached = {0}
            for node in range(1, found.size):
                if found.parents[node] in reached:
                    at = position + len(found.paths[node]) - 1
                    taken = at < len(text) and text[at] == found.tokens[node]
                    key = cast(Key, found.keys[node])  # only node 0 has none
                    counts[key][0] += taken
                    counts[key][1] += 1
                    if taken:
                        reached.add(node)
    return counts


def rates(counts: dict[Key, list[int]]) -> tuple[dict[Key, float], float]:
    """Each key's rate, shrunk towards its match length and depth's, that towards the overall rate; and the overall."""
    taken, tried = (sum(c[i] for c in counts.values()) for i in (0, 1))
    overall = (taken + 1) / (tried + 2)
    grouped: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for key, (hit, seen) in counts.items():
        grouped[coarse(key)][0] += hit
        grouped[coarse(key)][1] += seen
    middle = {group: (hit + SHRINK * overall) / (seen + SHRINK) for group, (hit, seen) in grouped.items()}
    return {key: (hit + SHRINK * middle[coarse(key)]) / (seen + SHRINK) for key, (hit, seen) in counts.items()}, overall


class CorpusTrainer(Trainer):
    description = "make a retrieval corpus of the target's own responses, with acceptance rates measured on held-out ones"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_common_arguments(parser, prompts=1500, held_out=100, max_new_tokens=256)
        parser.add_argument("--more-prompts", type=int, default=1728,
                            help="prompts of further kinds of task, after --prompts of the diffusion recipe's kinds")
        parser.add_argument("--code-prompts", type=int, default=1080,
                            help="programming prompts (ten kinds of Python task), after the others")
        parser.add_argument("--completion-prompts", type=int, default=1080,
                            help="Python function stubs to complete (ten kinds, given as bare code), after the others")
        parser.add_argument("--batch-size", type=int, default=32)
        parser.add_argument("--longest", type=int, default=32, help="the longest match looked for, in tokens")
        parser.add_argument("--nodes", type=int, default=16, help="candidates per position when measuring rates")
        parser.add_argument("--depth", type=int, default=8, help="how deep candidates go when measuring rates")

    def run(self, args: argparse.Namespace) -> int:
        work = open_workspace(args)
        more = stored_prompts(work.out / "more-prompts.json", args.more_prompts, args.seed, args.exclude, CORPUS_TEMPLATES)
        code = stored_prompts(work.out / "code-prompts.json", args.code_prompts, args.seed, args.exclude, CODE_TEMPLATES)
        stubs = stored_prompts(work.out / "completion-prompts.json", args.completion_prompts, args.seed, args.exclude,
                               COMPLETION_TEMPLATES)
        prompts = work.prompts + more + code + stubs
        parts = f"{len(work.prompts)} + {len(more)} + {len(code)} + {len(stubs)}"
        _log(f"{len(prompts)} prompts ({parts}, kept in {work.out})")
        path = work.out / "responses.jsonl"
        generate_responses(work.model, work.tokenizer, prompts, path, args.max_new_tokens, args.batch_size)
        texts, opening = documents(read_responses(path))
        kept, held_out = split_held_out(texts, args.held_out)
        _log(f"measuring acceptance on {len(held_out)} held-out responses against a corpus of the other {len(kept)}")
        counts = taken_counts(Datastore.of(kept), held_out, [opening] * len(held_out), args.longest, args.nodes, args.depth)
        priors, overall = rates(counts)
        store = Datastore.of(texts)
        source = (f"specmix train corpus: greedy responses (up to {args.max_new_tokens} tokens) to {len(texts)} prompts "
                  f"({parts}, seed {args.seed}); rates on {len(held_out)} held out")
        corpus = Corpus(CorpusConfig(fingerprint(work.model), store.documents, store.tokens, source), store, priors,
                        overall)
        corpus.save(work.out)
        first = [counts[key] for key in counts if key[1] == 1]
        tried = sum(c[1] for c in first)
        report = {"documents": store.documents, "tokens": store.tokens, "held_out": len(held_out),
                  "first_token_taken": sum(c[0] for c in first) / max(tried, 1), "seconds_this_run": work.elapsed()}
        (work.out / "report.json").write_text(json.dumps(report, indent=1))
        _log(f"{store.tokens} tokens in {store.documents} documents; held out, a first candidate is taken "
             f"{report['first_token_taken']:.1%} of the time; corpus saved in {work.out}")
        return 0
