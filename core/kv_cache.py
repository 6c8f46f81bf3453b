"""A key/value cache that writes into preallocated buffers and compacts in place.

HF's ``DynamicCache`` concatenates on every forward, copying the whole cache each step,
and compaction would copy it again. Here each layer owns buffers with spare room: a
forward writes its new entries after the last one, rejected tree nodes are dropped by
moving a length back, and accepted ones are moved down over them. The model sees views
of the filled part through the public ``Cache`` interface.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import attrs
import torch
from transformers.cache_utils import Cache, DynamicLayer

GROWTH = 256  # tokens of room added at a time; a buffer grows by doubling past that


class PreallocatedLayer(DynamicLayer):
    def _buffer(self, states: torch.Tensor) -> torch.Tensor:
        """A buffer laid out like ``states`` with room for the first tokens."""
        return states.new_empty(*states.shape[:-2], GROWTH, states.shape[-1])

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._keys, self._values = self._buffer(key_states), self._buffer(value_states)
        self.length = 0
        self.is_initialized = True
        self._expose()

    def _expose(self) -> None:
        self.keys, self.values = self._keys[..., : self.length, :], self._values[..., : self.length, :]

    def _reserve(self, length: int) -> None:
        capacity = self._keys.shape[-2]
        if length <= capacity:
            return
        capacity = max(length, 2 * capacity)
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            new = old.new_empty(*old.shape[:-2], capacity, old.shape[-1])
            new[..., : self.length, :] = old[..., : self.length, :]
            setattr(self, name, new)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        count = key_states.shape[-2]
        self._reserve(self.length + count)
        self._keys[..., self.length: self.length + count, :] = key_states
        self._values[..., self.length: self.length + count, :] = value_states
        self.length += count
        self._expose()
        return cast(torch.Tensor, self.keys), cast(torch.Tensor, self.values)

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes the negative number of tokens to remove")
        if self.is_initialized and tokens_to_remove:
            self.length = max(0, self.length + tokens_to_remove)
            self._expose()

    def keep_last(self, appended: int, keep: torch.Tensor) -> None:
        """Of the last ``appended`` entries, keep those at ``keep`` (sorted ascending), moved down in place."""
        past = self.length - appended
        index = keep.to(self._keys.device) + past
        for buffer in (self._keys, self._values):
            # index_select copies first, so overlapping source and destination are safe.
            buffer[..., past: past + index.shape[0], :] = buffer.index_select(-2, index)
        self.length = past + index.shape[0]
        self._expose()

    def reset(self) -> None:
        self.length = 0
        super().reset()


class PreallocatedCache(Cache):
    def __init__(self, make_layer: Callable[[], PreallocatedLayer] = PreallocatedLayer) -> None:
        # The cache only calls it, so any factory does where transformers' annotation says a class.
        super().__init__(layer_class_to_replicate=make_layer)  # type: ignore[arg-type]

    def keep_last(self, appended: int, keep: torch.Tensor) -> None:
        """Keep, of the last ``appended`` entries of every layer, those at ``keep``."""
        for layer in cast("list[PreallocatedLayer]", self.layers):
            layer.keep_last(appended, keep)


class SlotLayer(PreallocatedLayer):
    """A fixed-capacity layer whose forward writes at the cache's ``slots`` and returns whole buffers.

    Shapes then never change between steps (the mask hides unused slots), which is what
    CUDA graph replay needs: where to write is a device tensor, not a Python slice.
    The host-side length is advanced by the owner after the forward, never inside it.
    """

    def __init__(self, capacity: int, slots: SlotPointer) -> None:
        super().__init__()
        self.capacity, self.slots = capacity, slots

    def _buffer(self, states: torch.Tensor) -> torch.Tensor:
        # Zeros, not empty: masked-out slots still enter attention's weighted sum (with weight 0).
        return states.new_zeros(*states.shape[:-2], self.capacity, states.shape[-1])

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        slots = cast(torch.Tensor, self.slots.tensor)  # filled before every forward
        self._keys.index_copy_(-2, slots, key_states)
        self._values.index_copy_(-2, slots, value_states)
        return self._keys, self._values

    def advance(self, count: int) -> None:
        if self.is_initialized:
            self.length += count
            self._expose()


@attrs.define
class SlotPointer:
    """The cache slots the next forward writes, shared by every layer (replaced or refilled before each forward)."""

    tensor: torch.Tensor | None = None


class SlotCache(PreallocatedCache):
    """Every layer a :class:`SlotLayer` of ``capacity`` tokens; ``slots`` says where a forward writes."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.slots = capacity, SlotPointer()
        super().__init__(lambda: SlotLayer(capacity, self.slots))

    def take(self, other: SlotCache) -> None:
        """Copy ``other``'s filled entries into this (larger) cache."""
        self.layers = []
        for old in cast("list[SlotLayer]", other.layers):
            layer = cast("Callable[[], SlotLayer]", self.layer_class_to_replicate)()
            if old.is_initialized:
                layer.lazy_initialization(old._keys, old._values)
                layer._keys[..., : old.length, :] = old._keys[..., : old.length, :]
                layer._values[..., : old.length, :] = old._values[..., : old.length, :]
                layer.advance(old.length)
            self.layers.append(layer)

    def empty(self) -> None:
        """Forget every entry, keeping the buffers (and so the addresses captured graphs use)."""
        for layer in cast("list[SlotLayer]", self.layers):
            layer.length = 0
            layer._expose()

    def advance(self, count: int) -> None:
        """Count the ``count`` entries the last forward wrote after the filled part."""
        for layer in cast("list[SlotLayer]", self.layers):
            layer.advance(count)
