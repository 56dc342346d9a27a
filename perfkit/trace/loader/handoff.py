"""How the parser's chunks reach its worker processes without travelling through a pipe.

- Shared slots: memory shared with forked workers (:func:`perfkit.trace.loader.decode.share_memory`) is
  cut into slots of one chunk each; the parser writes ``[events]`` into a free slot and a worker
  decodes it in place (:func:`~perfkit.trace.loader.decode.decode_shared`). :class:`SlotWriter` fills the
  slots from a stream of blocks (a gzip file's inflated bytes), each byte copied once.
- Byte ranges (:func:`range_cuts`): the cuts of a plain file are found by reading a window at each
  one, and the workers read the ranges between cuts from the file themselves.
"""
from __future__ import annotations

import os
from typing import Callable

from ...limits import MAX_EVENT_BYTES
from .decode import share_memory

SPARE_BYTES = 5 << 20  # past a chunk's target size: the event that ends it, and a block
_WINDOW_BYTES = 64 << 10  # read at each cut of a plain file, to find the end of an event there


class Slots:
    """``count`` slots of ``chunk_bytes`` + :data:`SPARE_BYTES` in memory the workers forked after
    this share; ``free``: the offsets of the slots no chunk holds."""

    def __init__(self, count: int, chunk_bytes: int):
        self.chunk_bytes, self.size = chunk_bytes, chunk_bytes + SPARE_BYTES
        self.memory = share_memory(self.size * count)
        self.free = [i * self.size for i in range(count)]

    def put(self, events: memoryview) -> int:
        """Write ``[events]`` into a free slot; its offset, or -1 when none is free or it is too long."""
        size = len(events) + 2
        if not self.free or size > self.size:
            return -1
        slot = self.free.pop()
        self.begin(slot, events)
        self.memory[slot + size - 1] = ord("]")
        return slot

    def begin(self, slot: int, events) -> int:
        """Write ``[`` and ``events`` (bytes, or a view of this memory) at ``slot``; the bytes written."""
        with memoryview(self.memory) as memory:
            memory[slot] = ord("[")
            memory[slot + 1:slot + 1 + len(events)] = events
        return 1 + len(events)

    def close(self) -> None:
        self.memory.close()


class SlotWriter:
    """Writes a stream of event bytes into ``slots``, cutting a chunk once it holds ``chunk_bytes``
    at the first place ``cut(memory, lo, hi)`` finds in memory[lo:hi] (``(end of an event, start of
    the next)``, or None). ``first``: the bytes the stream starts with (from an event's start).

    ``dispatch(slot, size, consumed)`` is called for each chunk, ``[events]`` in ``size`` bytes at
    ``slot``, which took ``consumed`` bytes of the stream (the separator after it included);
    ``wait()`` while no slot is free (it must free one: take a decoded chunk back).
    """

    def __init__(self, slots: Slots, first: bytes, cut: Callable, dispatch: Callable, wait: Callable):
        self.slots, self.cut, self.dispatch, self.wait = slots, cut, dispatch, wait
        self.slot, self.searched = self._free_slot(), 0
        self.fill = slots.begin(self.slot, first)

    def write(self, block) -> bool:
        """Append ``block`` and dispatch the chunks it completes; False (nothing written) when it
        does not fit in the open slot: no cut was found in reach (an event longer than the spare room)."""
        slot, fill = self.slot, self.fill
        if fill + len(block) > self.slots.size:
            return False
        with memoryview(self.slots.memory) as memory:
            memory[slot + fill:slot + fill + len(block)] = block
            self.fill += len(block)
            while self.fill > 1 + self.slots.chunk_bytes and self._cut_once(memory):
                pass
        return True

    def rest(self) -> bytearray:
        """The bytes of the open slot (from its first event on), freeing it."""
        with memoryview(self.slots.memory) as memory:
            out = bytearray(memory[self.slot + 1:self.slot + self.fill])
        self.slots.free.append(self.slot)
        self.fill = 1
        return out

    def _cut_once(self, memory: memoryview) -> bool:
        slot, fill = self.slot, self.fill
        found = self.cut(self.slots.memory, slot + max(1 + self.slots.chunk_bytes, self.searched - 64), slot + fill)
        if found is None:
            self.searched = fill
            return False
        end, start = found[0] - slot, found[1] - slot
        following = self._free_slot()
        with memory[slot + start:slot + fill] as rest:
            self.fill = self.slots.begin(following, rest)
        memory[slot + end] = ord("]")
        self.slot, self.searched = following, 0
        self.dispatch(slot, end + 1, start - 1)
        return True

    def _free_slot(self) -> int:
        while not self.slots.free:
            self.wait()
        return self.slots.free.pop()


def range_cuts(fd: int, start: int, size: int, chunk_bytes: int, cut: Callable, too_big: Callable):
    """The cuts ``(end of an event, start of the next)`` of a plain file (descriptor ``fd``, ``size``
    bytes) from ``start``, each at the first place ``cut(data, lo, hi)`` finds past ``chunk_bytes``
    since the previous one, reading only a window there; none within a window of the end.
    ``too_big(offset)`` raises for an event from ``offset`` that no window up to MAX_EVENT_BYTES ends."""
    while True:
        target, window, found = start + chunk_bytes, _WINDOW_BYTES, None
        while found is None and target + window < size:
            data = os.pread(fd, window, target)
            found = cut(data, 0, len(data))
            if found is None and window > MAX_EVENT_BYTES.value():
                too_big(start)
            window *= 4
        if found is None:
            return
        start = target + found[1]
        yield target + found[0], start
