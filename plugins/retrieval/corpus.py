"""A corpus directory: the target's earlier text as a datastore, and the acceptance rates measured on held-out text.

``config.json`` names the target (its fingerprint) and says what the corpus holds;
``tokens.npy`` holds the documents (int32, each followed by -1); ``odds.json`` holds,
per odds key (:func:`specmix.plugins.retrieval.candidates.node_key`), the share of nodes the target
took on held-out answers, and the overall share.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import numpy as np

from specmix.plugins.retrieval.datastore import Datastore
from specmix.plugins.trained import weights_dir

CORPUS_HINT = "make one with `specmix train corpus --target MODEL --out DIR` and pass -o drafter.corpus=DIR"
TOKENS_FILE = "tokens.npy"
ODDS_FILE = "odds.json"


@attrs.frozen
class CorpusConfig:
    target: str
    """The fingerprint of the target whose text this is (see :func:`specmix.target.fingerprint`)."""
    documents: int
    tokens: int
    source: str = ""
    """How the text was made (the recipe and its settings)."""


@attrs.frozen
class Corpus:
    config: CorpusConfig
    store: Datastore = attrs.field(eq=False)
    priors: dict = attrs.field(eq=False)
    """Per odds key, the held-out rate at which the target took such nodes."""
    overall: float
    """The held-out rate over all keys: the prior of a key never measured."""

    @classmethod
    def find(cls, chosen: str | None, fingerprint: str, shipped: Path) -> Corpus:
        """``chosen`` (a directory), else the corpus shipped for this target; either must be this target's."""
        directory, config = weights_dir.find(CorpusConfig, fingerprint, chosen=chosen, shipped=shipped, what="corpus",
                                             hint=CORPUS_HINT)
        return cls.load(directory, config)

    @classmethod
    def load(cls, directory: Path, config: CorpusConfig | None = None) -> Corpus:
        directory = Path(directory)
        config = config or weights_dir.read_config(CorpusConfig, directory)
        odds = json.loads((directory / ODDS_FILE).read_text())
        return cls(config, Datastore.load(directory / TOKENS_FILE), {tuple(key): rate for key, rate in odds["priors"]},
                   odds["overall"])

    def save(self, directory: Path) -> None:
        directory = weights_dir.write_config(self.config, directory)
        self.store.save(directory / TOKENS_FILE)
        rates = [[list(key), rate] for key, rate in sorted(self.priors.items())]
        (directory / ODDS_FILE).write_text(json.dumps({"overall": self.overall, "priors": rates}))

    @classmethod
    def random(cls, vocab_size: int, fingerprint: str, documents: int, seed: int = 0) -> Corpus:
        """Random documents over the vocabulary (for tests: losslessness never depends on the corpus)."""
        generator = np.random.default_rng(seed)
        texts = [generator.integers(0, vocab_size, size=int(generator.integers(4, 64))).tolist() for _ in range(documents)]
        store = Datastore.of(texts)
        return cls(CorpusConfig(fingerprint, documents, store.tokens, "random"), store, {}, 0.5)
