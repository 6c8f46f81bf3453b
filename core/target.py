"""The target model, driven only through its public forward: explicit positions, a 4D additive mask, a cache object."""

from __future__ import annotations

import inspect

import torch

from specmix.attention import FLEX, backend_of, tree_mask
from specmix.errors import ConfigurationError
from specmix.kv_cache import PreallocatedCache
from specmix.static_shapes import INITIAL_CAPACITY, StaticShapes


def _ids(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))


def fingerprint(model) -> str:
    """What must match between a trained plugin artifact and its target: architecture, sizes and embedding values."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    embedding = model.get_input_embeddings().weight
    probe = float(embedding.detach()[:: max(1, embedding.shape[0] // 64)].double().sum())
    return f"{config.model_type}-{config.num_hidden_layers}x{config.hidden_size}-v{config.vocab_size}-{probe:.6e}"


class Target:
    """One HF decoder model plus the cache of the generation in progress.

    The cache always holds every committed token but the last (the root of the next
    tree). ``forward`` appends new tokens; ``compact`` then keeps only chosen ones.

    With ``static`` shapes (the default on CUDA) forwards are padded to bucket sizes over
    a fixed-capacity cache (``capacity`` tokens at first, doubled when full) and replayed
    as CUDA graphs there (see :mod:`specmix.static_shapes`).
    """

    def __init__(self, model, static: bool | None = None, capacity: int = INITIAL_CAPACITY):
        self.model = model.eval()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.num_layers = int(config.num_hidden_layers)
        window = getattr(config, "sliding_window", None)
        layer_types = getattr(config, "layer_types", None) or ()
        slides = window is not None and getattr(config, "use_sliding_window", True) is not False
        slides = slides and (not layer_types or "sliding_attention" in layer_types)
        # Past a sliding window the model would mask old tokens; we never go that far.
        self.max_length = min(int(config.max_position_embeddings), int(window) if slides else 1 << 62)
        generation = getattr(model, "generation_config", None)
        self.eos_ids = _ids(getattr(generation, "eos_token_id", None)) or _ids(getattr(config, "eos_token_id", None))
        parameters = inspect.signature(model.forward).parameters
        self._cache_keyword = "cache" if "cache" in parameters else "past_key_values"
        self._can_skip_logits = "logits_to_keep" in parameters
        flex = backend_of(model) == FLEX
        if static and flex:
            raise ConfigurationError("static shapes need an additive-mask attention backend (sdpa or eager), "
                                     "not flex_attention, whose block mask is rebuilt on the host every step")
        cuda = self.device.type == "cuda"
        if static is None:
            static = cuda and not flex
        self._static = StaticShapes(model, graphs=cuda, capacity=capacity) if static else None
        self.reset()

    @property
    def cache(self):
        """The HF ``Cache`` the model reads and writes (a static-shape forward may move it into a larger one)."""
        return self._static.cache if self._static is not None else self._dynamic_cache

    @property
    def static(self) -> bool:
        """Whether forwards run at bucketed sizes over a fixed-capacity cache."""
        return self._static is not None

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.model)

    @property
    def length(self) -> int:
        """Tokens held in the cache."""
        return self.cache.get_seq_length()

    def reset(self) -> None:
        if self._static is None:
            self._dynamic_cache = PreallocatedCache()
        else:
            self._static.reset()
        self._pending = 0

    def check_layers(self, layers: tuple[int, ...]) -> None:
        bad = [layer for layer in layers if not 0 <= layer <= self.num_layers]
        if bad:
            raise ConfigurationError(f"hidden layers {bad} do not exist; this target has layers 0..{self.num_layers}")

    @torch.no_grad()
    def forward(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor, layers: tuple[int, ...] = (),
                logits: bool = True):
        """Append ``ids`` at absolute ``positions``; token ``i`` sees the whole cache and new token ``j`` where ``visible[i, j]``.

        Returns logits ``[T, V]`` (only the last row's is computed when ``logits=False``,
        which spares the LM head over a long prompt) and the hidden states ``{layer: [T, D]}``.
        """
        count = ids.shape[0]
        if self._static is not None:
            all_logits, states, self._pending = self._static.forward(ids, positions, visible, layers, self._call)
            return all_logits[:count], {layer: states[layer][0, :count] for layer in layers}
        mask = tree_mask(self.model, visible, self.length)
        out = self._call(ids.to(self.device)[None], positions.to(self.device)[None], mask, bool(layers),
                         last_only=not logits)
        self._pending = count
        return out.logits[0], {layer: out.hidden_states[layer][0] for layer in layers}

    def _call(self, ids, positions, mask, hidden: bool, last_only: bool = False):
        """The model's forward over batched ``ids [1, T]`` at ``positions`` with ``mask``, into the cache."""
        return self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=mask,
            use_cache=True,
            output_hidden_states=hidden,
            **{self._cache_keyword: self.cache},
            **({"logits_to_keep": 1} if last_only and self._can_skip_logits else {}),
        )

    def prefill(self, ids: torch.Tensor, layers: tuple[int, ...] = ()):
        """Causal forward over ``ids`` after the cache; returns hidden states ``{layer: [T, D]}``."""
        count = ids.shape[0]
        if count == 0:
            hidden_size = self.model.get_input_embeddings().weight.shape[1]
            return {layer: torch.zeros(0, hidden_size, dtype=self.dtype, device=self.device) for layer in layers}
        positions = torch.arange(self.length, self.length + count)
        causal = torch.ones(count, count, dtype=torch.bool).tril()
        _, hidden = self.forward(ids, positions, causal, layers, logits=False)
        self.compact(torch.arange(count))  # keeps every token, dropping only static padding
        return hidden

    def compact(self, keep: torch.Tensor) -> None:
        """Keep, of the tokens the last ``forward`` appended, those at indices ``keep`` (ascending), in place."""
        appended, self._pending = self._pending, 0
        kept = keep.shape[0]
        if bool((keep == torch.arange(kept, device=keep.device)).all()):
            if appended > kept:
                self.cache.crop(kept - appended)
            return
        self.cache.keep_last(appended, keep)
