"""The target model, driven only through its public forward: explicit positions, a 4D additive mask, a cache object."""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch

from specmix.attention import FLEX, backend_of, tree_mask
from specmix.errors import ConfigurationError, one_line
from specmix.identity import fingerprint, measured_name, shapes_name
from specmix.kernels.grouped_attention import group_queries
from specmix.kernels.node_logits import HeadCosts, NodeLogits, as_node_logits
from specmix.kernels.row_kernels import RowKernels, active, switch_layers
from specmix.kernels.screened_head import ScreenedHead
from specmix.kernels.static_shapes import INITIAL_CAPACITY, StaticShapes, padded
from specmix.kv_cache import PreallocatedCache
from specmix.models.loading import loaded_by_specmix
from specmix.paths import cache_dir
from specmix.tree import TokenTree
from specmix.values import Riders

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask
    from transformers import PreTrainedModel


def _ids(value: int | list[int] | tuple[int, ...] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))


@attrs.frozen
class TreeOutputs:
    """The target's outputs over one tree forward of ``N`` nodes and ``R`` riders."""

    node_logits: NodeLogits = attrs.field(alias="logits", converter=as_node_logits, eq=False)
    """``[N, V]`` at the tree's nodes, root first, row by row as asked for."""
    rider_logits: torch.Tensor | None = attrs.field(eq=False)
    """``[R, V]`` at the riders (None when the forward carried none)."""
    hidden: Mapping[int, torch.Tensor] = attrs.field(eq=False)
    """``{layer: [N, D]}`` at the tree's nodes."""

    @property
    def logits(self) -> torch.Tensor:
        """``[N, V]`` at every node."""
        return self.node_logits.all()

    def hidden_along(self, path: Sequence[int]) -> dict[int, torch.Tensor]:
        """The hidden states at the root and the nodes of ``path``: ``{layer: [1 + len(path), D]}``."""
        if not self.hidden:
            return {}
        keep = torch.tensor([0, *path], device=next(iter(self.hidden.values())).device)
        return {layer: states.index_select(0, keep) for layer, states in self.hidden.items()}


def _plain_head_decoder(model, head):
    """The model's decoder when its logits are exactly ``head`` over the decoder's last hidden state, else None.

    Checked on a short input, bit for bit: a model that scales, caps or otherwise reworks
    its logits (or whose decoder does not run alone) keeps computing them whole.
    """
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    if decoder is None or decoder is model or head is None:
        return None
    ids = torch.arange(3, device=model.device)[None] % head.weight.shape[0]
    try:
        with torch.no_grad():
            whole = model(input_ids=ids, use_cache=False).logits[0]
            final = decoder(input_ids=ids, use_cache=False).last_hidden_state[0]
            return decoder if torch.equal(head(final), whole) else None
    except (TypeError, ValueError, AttributeError, RuntimeError):  # its parts do not run this way
        return None


def _own_copy(model):
    """A copy of ``model``'s modules and configs that shares its parameters and buffers: what the target sets on it
    (eval mode, attention, matrix kernels) leaves ``model`` as it was, at no cost in weight memory."""
    shared = {id(tensor): tensor for tensor in [*model.parameters(), *model.buffers()]}
    try:
        return copy.deepcopy(model, memo=shared)
    except Exception as exc:  # whatever a module holds that deepcopy cannot take (a lock, a non-leaf tensor)
        raise ConfigurationError(f"specmix decodes on its own copy of a model it did not load, and this one cannot be "
                                 f"copied ({one_line(exc)}); give specmix.load its id or directory instead") from exc


class Target:
    """One HF decoder model plus the cache of the generation in progress.

    The cache contract: between steps the cache holds every committed token but the last
    (the root of the next tree), each at its own position. ``forward_tree`` appends a
    tree (and riders) after it, ``commit`` keeps the root and an accepted path. Both go
    through ``forward`` and ``compact``, which record what the cache holds, so that the
    engine can check the contract after every step (:meth:`holds`).

    With ``static`` shapes (the default on CUDA) forwards are padded to bucket sizes over
    a fixed-capacity cache (``capacity`` tokens at first, doubled when full) and replayed
    as CUDA graphs there (see :mod:`specmix.kernels.static_shapes`). With ``fast`` CPU paths, a model on
    transformers' ``sdpa`` attention is switched to :mod:`specmix.kernels.grouped_attention`, which computes the same
    outputs without copying key/value heads, and its linear layers to :mod:`specmix.kernels.row_kernels`.

    A model specmix loaded itself (:func:`specmix.models.loading.load_model`) is run, and switched, in place; any other
    model is run through a copy of its modules that shares its weights, so that the caller's model never changes
    (changes made to its modules afterwards do not reach the target either).

    Everything that runs the model or touches the cache runs in ``torch.inference_mode``, which
    skips autograd's bookkeeping on each of a forward's thousand-odd small operations (on two
    CPU cores, 3 ms of a 44 ms one-token forward); the logits and hidden states it returns are
    inference tensors, to be read, or cloned before being changed in place.
    """
    def __init__(self, model: PreTrainedModel, static: bool | None = None, capacity: int = INITIAL_CAPACITY,
                 cache: str | os.PathLike | None = None, fast: bool | None = None):
        """``cache``: where the choice of matrix kernels is kept (see :mod:`specmix.kernels.row_kernels`).
        ``fast``: the fast CPU paths (None: on for a model specmix loaded, off for a caller's)."""
        own = loaded_by_specmix(model)
        fast = own if fast is None else fast
        model = self.model = (model if own else _own_copy(model)).eval()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.num_layers = int(config.num_hidden_layers)
        window = getattr(config, "sliding_window", None)
        layer_types = getattr(config, "layer_types", None) or ()
        slides = window is not None and getattr(config, "use_sliding_window", True) is not False
        slides = slides and (not layer_types or "sliding_attention" in layer_types)
        # Past a sliding window the model would mask old tokens; we never go that far.
        self.max_length = min(int(config.max_position_embeddings), int(window) if slides and window is not None else 1 << 62)
        generation = getattr(model, "generation_config", None)
        self.eos_ids = _ids(getattr(generation, "eos_token_id", None)) or _ids(getattr(config, "eos_token_id", None))
        parameters = inspect.signature(model.forward).parameters
        self._cache_keyword = "cache" if "cache" in parameters else "past_key_values"
        self._can_skip_logits = "logits_to_keep" in parameters
        self._head = model.get_output_embeddings()
        flex = backend_of(model) == FLEX
        if static and flex:
            raise ConfigurationError("static shapes need an additive-mask attention backend (sdpa or eager), "
                                     "not flex_attention, whose block mask is rebuilt on the host every step")
        cuda = self.device.type == "cuda"
        if flex and not cuda:
            # Seen on an AMD CPU with torch 2.13: transformers' compiled FlexAttention returned NaN or logits off
            # by whole units on some calls, now and then, with no speculation involved; greedy output changed.
            raise ConfigurationError("flex_attention is refused on CPU, where torch's compiled FlexAttention "
                                     "kernel returned wrong values on some calls; use attention='sdpa'")
        if static is None:
            static = cuda and not flex
        if fast and not cuda:
            group_queries(model)  # the same outputs, without copying key/value heads (see specmix.kernels.grouped_attention)
        self._static = StaticShapes(model, graphs=cuda, capacity=capacity) if static else None
        self._kernel_cache = cache
        self.row_kernels: RowKernels | None = (switch_layers(model, measured_name(model), cache) if fast and not static
                                               else None)
        """The matrix kernels this target's forwards take where they are faster (None: the model's own)."""
        self._decoder = None if static else _plain_head_decoder(model, self._head)
        self._head_costs: HeadCosts | None = None
        self.screen: ScreenedHead | None = None
        """The exact greedy argmax of the LM head through a float16 copy (:mod:`specmix.kernels.screened_head`), where
        the head runs on the rows a walk reads and this is faster than one float32 row; None: rows decide."""
        if self._decoder is not None:
            with active(self.row_kernels):
                self.screen = ScreenedHead.for_head(self._head, record=self._screen_record(model))
                self._head_costs = HeadCosts.measure(self._head, self.screen)
            known = inspect.signature(self._decoder.forward).parameters
            self._decoder_cache_keyword = "cache" if "cache" in known else "past_key_values"
        self.reset()

    def _screen_record(self, model: PreTrainedModel) -> Path:
        """Where the choice of a screened head is kept: under ``head-screen/`` in the cache directory, named like
        the cost curve (the model, the machine, the row kernels its head rows take, torch)."""
        name = f"{measured_name(model)}{self.kernels_name}-torch{torch.__version__}.json"
        return cache_dir(self._kernel_cache) / "head-screen" / name

    @property
    def kernels_name(self) -> str:
        """The part of a cached measurement's name that says which matrix kernels it ran on ("" for the model's own)."""
        return "" if self.row_kernels is None else f"-rowkernels{self.row_kernels.digest}"

    @property
    def lazy_head(self) -> bool:
        """Whether tree forwards apply the LM head only to the rows a walk reads (see :mod:`specmix.kernels.node_logits`)."""
        return self._decoder is not None

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

    @torch.inference_mode()
    def reset(self) -> None:
        if self._static is None:
            self._dynamic_cache = PreallocatedCache()
        else:
            self._static.reset()
        self._held: list[int] = []  # token ids in the cache, in order
        self._positions: list[int] = []  # and the position each was written at
        self._appended: list[tuple[int, int]] = []  # what the last forward wrote, padding as (-1, -1)

    def holds(self, tokens: Sequence[int], new: int) -> bool:
        """Whether the cache holds ``tokens`` at positions 0, 1, ..., checking the last ``new`` (the rest held before)."""
        count = len(tokens)
        if self.length != count or len(self._held) != count:
            return False
        tail = slice(count - new, count)
        return self._held[tail] == list(tokens[tail]) and self._positions[tail] == list(range(count - new, count))

    def kernels_for(self, module: torch.nn.Module) -> RowKernels | None:
        """The matrix kernels a drafter's own ``module`` should run on inside :func:`specmix.kernels.row_kernels.active`,
        measured and cached as the target's own are (None where the target keeps the model's own kernels)."""
        return None if self.row_kernels is None else switch_layers(module, shapes_name(module), self._kernel_cache)

    def check_layers(self, layers: tuple[int, ...]) -> None:
        bad = [layer for layer in layers if not 0 <= layer <= self.num_layers]
        if bad:
            raise ConfigurationError(f"hidden layers {bad} do not exist; this target has layers 0..{self.num_layers}")

    @torch.inference_mode()
    def forward_tree(self, tree: TokenTree, riders: Riders | None = None, layers: Sequence[int] = (),
                     pad_to: Callable[[int], int] | None = None) -> TreeOutputs:
        """Append the root and nodes of ``tree`` (``N``) and ``riders`` (``R``) after the cache, in one forward.

        Node ``i`` sits at the root's position plus its depth and sees the cache and its
        ancestors; rider ``r`` sits at the root's position plus ``riders.offsets[r]`` and
        sees the cache, the root and the riders its row of ``riders.visible`` names.
        Nodes and riders never see each other. :meth:`commit` then keeps an accepted path.
        ``pad_to(n)``: the size to run a forward of ``n`` positions at, where a larger one costs less
        (:meth:`CostCurve.padded_size`); the padding sees only itself and is dropped on commit.
        """
        with active(self.row_kernels):
            return self._forward_tree(tree, riders, layers, pad_to)

    def _forward_tree(self, tree: TokenTree, riders: Riders | None, layers: Sequence[int],
                      pad_to: Callable[[int], int] | None) -> TreeOutputs:
        size, count = tree.size, 0 if riders is None else riders.count
        root_position = self.length
        ids, positions = tree.tokens, root_position + torch.tensor(tree.depth_list)
        if riders is not None and count:
            visible = torch.zeros(size + count, size + count, dtype=torch.bool)
            visible[:size, :size] = tree.ancestor_mask()
            visible[size:, 0] = riders.visible[:, 0]
            visible[size:, size:] = riders.visible[:, 1:]
            ids = torch.cat([ids, riders.tokens])
            positions = torch.cat([positions, root_position + riders.offsets])
        else:
            visible = tree.ancestor_mask()
        ids, positions, visible = self._padded(ids, positions, visible, pad_to)
        end = size + count
        if self._decoder is None:
            logits, hidden = self.forward(ids, positions, visible, layers)
            return TreeOutputs(logits[:size], None if riders is None else logits[size:end],
                               {layer: states[:size] for layer, states in hidden.items()})
        final, hidden = self._forward_final(ids, positions, visible, layers)
        return TreeOutputs(NodeLogits.lazy(final[:size], self._head_rows, self.vocab_size, self._head_costs, self.screen),
                           None if riders is None else self._head_rows(final[size:end]),
                           {layer: states[:size] for layer, states in hidden.items()})

    @torch.inference_mode()
    def _head_rows(self, final: torch.Tensor) -> torch.Tensor:
        """The LM head over rows of last hidden states, read after the forward (as a walk asks for them)."""
        with active(self.row_kernels):
            return self._head(final)

    def _padded(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor,
                pad_to: Callable[[int], int] | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A tree forward grown to the size ``pad_to`` names with copies of the root that see only themselves
        (static shapes pad on their own); :meth:`commit` drops them with the rejected nodes."""
        count = ids.shape[0]
        size = count if self._static is not None or pad_to is None else pad_to(count)
        return (ids, positions, visible) if size <= count else padded(ids, positions, visible, size)

    def commit(self, path: Sequence[int]) -> None:
        """Keep, of the last :meth:`forward_tree`, the root and the nodes of ``path`` (an accepted root path)."""
        self.compact(torch.tensor([0, *path]))

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor, layers: Sequence[int] = (),
                logits: bool = True) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """Append ``ids [T]`` at absolute ``positions [T]``; token ``i`` sees the whole cache and new token ``j``
        where ``visible[i, j]`` (``visible [T, T]``).

        Returns logits ``[T, V]`` (only the last row, ``[1, V]``, when ``logits=False``,
        which spares the LM head over a long prompt) and the hidden states ``{layer: [T, D]}``.
        """
        count = ids.shape[0]
        if self._static is not None:
            all_logits, states, appended = self._static.forward(ids, positions, visible, layers, self._call,
                                                                last_only=not logits)
        else:
            mask = tree_mask(self.model, visible, self.length)
            out = self._call(ids.to(self.device)[None], positions.to(self.device)[None], mask, bool(layers),
                             keep=None if logits else 1)
            all_logits, states, appended = out.logits[0], out.hidden_states, count
        self._record(ids, positions, appended)
        if not logits and all_logits.shape[0] > 1:  # a model without logits_to_keep computed every row
            all_logits = all_logits[count - 1:count]
        return all_logits[:count], {layer: states[layer][0, :count] for layer in layers}

    def _forward_final(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor,
                       layers: Sequence[int]) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """As :meth:`forward`, through the decoder alone: its last hidden states ``[T, D]`` instead of logits (called
        only inside :meth:`forward_tree`, in its inference mode)."""
        assert self._decoder is not None, "called only where the target has a plain-head decoder"
        mask = tree_mask(self.model, visible, self.length)
        out = self._decoder(input_ids=ids.to(self.device)[None], position_ids=positions.to(self.device)[None],
                            attention_mask=mask, use_cache=True, output_hidden_states=bool(layers),
                            **{self._decoder_cache_keyword: self.cache})
        self._record(ids, positions, ids.shape[0])
        return out.last_hidden_state[0], {layer: out.hidden_states[layer][0] for layer in layers}

    def _record(self, ids: torch.Tensor, positions: torch.Tensor, appended: int) -> None:
        written = list(zip(ids.tolist(), positions.tolist()))
        self._appended = written + [(-1, -1)] * (appended - len(written))

    def _call(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | BlockMask, hidden: bool,
              keep: int | torch.Tensor | None = None) -> Any:
        """The model's forward over batched ``ids [1, T]`` at ``positions`` with ``mask``, into the cache.

        ``keep`` (when the model takes ``logits_to_keep``) limits the LM head to the last
        ``keep`` rows, or to the rows a 1-D tensor names.
        """
        with active(self.row_kernels):
            return self.model(
                input_ids=ids,
                position_ids=positions,
                attention_mask=mask,
                use_cache=True,
                output_hidden_states=hidden,
                **{self._cache_keyword: self.cache},
                **({"logits_to_keep": keep} if keep is not None and self._can_skip_logits else {}),
            )

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor, layers: tuple[int, ...] = ()) -> dict[int, torch.Tensor]:
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

    @torch.inference_mode()
    def compact(self, keep: torch.Tensor) -> None:
        """Keep, of the tokens the last ``forward`` appended, those at indices ``keep`` (ascending), in place."""
        written, self._appended = self._appended, []
        for index in keep.tolist():
            token, position = written[index]
            self._held.append(token)
            self._positions.append(position)
        appended, kept = len(written), keep.shape[0]
        if bool((keep == torch.arange(kept, device=keep.device)).all()):
            if appended > kept:
                self.cache.crop(kept - appended)
            return
        self.cache.keep_last(appended, keep)
