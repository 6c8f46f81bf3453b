"""Static-shape forwards: bucketed token counts over a fixed-capacity cache, and CUDA graphs of them.

On a GPU a verification forward of a few dozen tokens is short enough that launching
its kernels costs as much as running them. Capturing the forward once as a CUDA graph
and replaying it removes that cost, but a graph replays fixed shapes at fixed addresses.
So in static mode every forward is padded to a bucket size (padding tokens see only the
cache and themselves, and nothing sees them), the cache is a fixed-capacity
:class:`~specmix.kv_cache.SlotCache` written at slots given as a device tensor, and the
mask spans the whole capacity. The padding is dropped with the rejected nodes.

On CPU static mode runs eagerly (it is tested there for exactness); graphs are captured
only on CUDA, one per bucket, capacity and set of hidden layers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from specmix.kv_cache import SlotCache

if TYPE_CHECKING:
    from transformers import PreTrainedModel

INITIAL_CAPACITY = 1024
"""Cache slots allocated at first; the cache doubles when a forward would overflow it."""

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Forward sizes a tree (with its riders) is padded to; larger forwards run at their own size, eagerly."""


def bucket(count: int) -> int:
    """The smallest bucket holding ``count`` tokens, or ``count`` itself past the largest."""
    return next((size for size in BUCKETS if size >= count), count)


def padded(ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor,
           size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A forward of ``T`` tokens grown to ``size`` with copies of its first token at its position; each padding
    token sees only itself (``visible [T, T]`` grown to ``[size, size]``), so no real token's output changes."""
    count = visible.shape[0]
    grown = torch.eye(size, dtype=torch.bool)
    grown[:count, :count] = visible
    extra = size - count
    return torch.cat([ids, ids[:1].expand(extra)]), torch.cat([positions, positions[:1].expand(extra)]), grown


def capacity_mask(visible: torch.Tensor, past: int, capacity: int, dtype: torch.dtype) -> torch.Tensor:
    """``[1, 1, T, capacity]`` additive mask: the filled cache, then ``visible`` over the new slots, nothing after."""
    count = visible.shape[0]
    allowed = torch.zeros(count, capacity, dtype=torch.bool)
    allowed[:, :past] = True
    allowed[:, past:past + count] = visible
    mask = torch.zeros(1, 1, count, capacity, dtype=dtype)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)


class GraphedForward:
    """One captured forward of fixed size: static input buffers, and the outputs the graph writes."""

    def __init__(self, run: Callable[..., Any], inputs: dict[str, torch.Tensor], slots: torch.Tensor) -> None:
        self.inputs, self.slots = inputs, slots
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph, as capture requires
            for _ in range(2):
                run(**inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = run(**inputs)

    def __call__(self, slots: torch.Tensor, **inputs: torch.Tensor) -> Any:
        self.slots.copy_(slots)
        for name, value in inputs.items():
            self.inputs[name].copy_(value)
        self.graph.replay()
        return self.outputs


class StaticShapes:
    """Runs a model's forwards at bucketed sizes over a :class:`SlotCache`, replaying CUDA graphs on CUDA."""

    def __init__(self, model: PreTrainedModel, graphs: bool, capacity: int = INITIAL_CAPACITY) -> None:
        self.model, self.graphs, self.capacity = model, graphs, capacity
        self.cache: SlotCache | None = None
        self._graphed: dict[tuple, GraphedForward | None] = {}

    def reset(self) -> SlotCache:
        """An empty cache; its buffers, and the graphs that use them, are kept from one generation to the next."""
        if self.cache is None:
            self.cache = SlotCache(self.capacity)
        self.cache.empty()
        return self.cache

    def _grow(self, needed: int) -> None:
        """Move the cache into one of at least twice the capacity; graphs of the old buffers are dropped."""
        old = self.cache
        assert old is not None, "reset() makes the cache"
        self.cache = SlotCache(max(needed, 2 * old.capacity))
        self.cache.take(old)
        self._graphed.clear()

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor, layers: Sequence[int],
                call: Callable[..., Any],
                last_only: bool = False) -> tuple[torch.Tensor, tuple, int]:
        """Logits, hidden states and the padded size of a forward of ``ids`` after the cache.

        ``call(ids, positions, mask, hidden, keep)`` runs the model on batched inputs. The
        logits are ``[size, V]``, or with ``last_only`` the last real token's ``[1, V]``:
        that forward (a prefill) runs eagerly, since its size rarely repeats.
        """
        assert self.cache is not None, "reset() makes the cache"
        count, past, device = ids.shape[0], self.cache.get_seq_length(), self.model.device
        size = bucket(count)
        if past + size > self.cache.capacity:
            self._grow(past + size)
        if size > count:
            ids, positions, visible = padded(ids, positions, visible, size)
        inputs = dict(ids=ids.to(device)[None], positions=positions.to(device)[None],
                      mask=capacity_mask(visible, past, self.cache.capacity, self.model.dtype).to(device))
        slots = torch.arange(past, past + size, device=device)
        graphed = None if last_only or size > BUCKETS[-1] else self._graph(size, bool(layers), call, inputs, slots)
        if graphed is not None:
            out = graphed(slots, **inputs)
            self.cache.advance(size)
            # The graph's outputs are overwritten by its next replay; what is returned may outlive that.
            return out.logits[0].clone(), tuple(states.clone() for states in out.hidden_states or ()), size
        self.cache.slots.tensor = slots
        keep = torch.tensor([count - 1], device=device) if last_only else None
        out = call(**inputs, hidden=bool(layers), keep=keep)
        self.cache.advance(size)
        return out.logits[0], out.hidden_states, size

    def _graph(self, size: int, hidden: bool, call: Callable[..., Any], inputs: dict[str, torch.Tensor],
               slots: torch.Tensor) -> GraphedForward | None:
        if not self.graphs:
            return None
        assert self.cache is not None, "reset() makes the cache"
        key = (size, self.cache.capacity, hidden)
        if key not in self._graphed:
            static_slots = slots.clone()
            self.cache.slots.tensor = static_slots
            try:
                self._graphed[key] = GraphedForward(lambda **kw: call(**kw, hidden=hidden),
                                                    {name: value.clone() for name, value in inputs.items()},
                                                    static_slots)
            except RuntimeError as error:  # a model whose forward cannot be captured still runs, eagerly
                print(f"specmix: CUDA graph capture failed for {size} tokens ({error}); running that size eagerly",
                      file=sys.stderr)
                self._graphed[key] = None
        return self._graphed[key]
