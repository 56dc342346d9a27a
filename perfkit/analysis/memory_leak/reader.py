"""Bounded, validating decoding of CUDA memory snapshot pickles and profiler memory timelines.

A snapshot file is untrusted input. Reading it goes through five gates, each a TraceError naming
the file when it fails:

1. gzip is inflated only up to ``limits.MAX_DECOMPRESSED_BYTES``;
2. the pickle's opcodes are walked once (no object is built) to check that every argument lies
   inside the file and every memo index is smaller than the file (a 10-byte pickle could otherwise
   make the C unpickler allocate gigabytes for its memo table);
3. the unpickler constructs no class or function (``find_class`` refuses every global);
4. the expansion is counted before anything is built: segments + blocks + history events + their
   stack frames must stay within ``limits.SNAPSHOT_MAX_ITEMS`` (a few hundred bytes of pickle can
   repeat one list by reference 20,000 x 20,000 times);
5. every number that feeds a figure must be an int within int64 and every label a string.
   Stack frames are only shown, so an unusable frame field is shown as ``?`` instead.
"""
from __future__ import annotations

import io
import pickle
import pickletools
import re
import zlib
from pathlib import Path

import numpy as np

from ...errors import TraceError
from ...limits import INT64_RANGE, MAX_DECOMPRESSED_BYTES, SNAPSHOT_MAX_ITEMS

_NOT_USER = ("/torch/", "\\torch\\", "/site-packages/", "\\site-packages\\", "/dist-packages/")
_OPTIM = ("/torch/optim/", "\\torch\\optim\\")
# C++ frames that say nothing about who allocated: the unwinder that records the stack, the caching
# allocator, tensor creation and resizing helpers, the dispatcher, CPython and libc (checked on the
# frames of the cs336 snapshots in ../shared/traces/memory, which start with torch::unwind::unwind()).
_MACHINERY = re.compile(
    r"torch::unwind|CapturedTraceback|gather_with_cpp|CachingAllocator|c10::Allocator|allocate|malloc"
    r"|at::detail::empty|_empty_generic|at::empty|at::native::empty|resize_|create_out|set_output"
    r"|TensorIteratorBase|c10::impl::|c10::Dispatcher|c10::KernelFunction|c10::BoxedKernel|at::_ops::"
    r"|wrap_kernel_functor|redispatch|^_?Py|^PyEval|cfunction_call|slot_tp_call"
    r"|^__libc|^_start$|^start_thread|^clone|^std::")
_AUTOGRAD_NODE = re.compile(r"\w+Backward\w*::apply")
_FIX = "expected torch.cuda.memory._snapshot() as written by torch.cuda.memory._dump_snapshot()"


# How a CUDA memory snapshot (a pickle of protocol 2 to 5: PROTO, then the protocol) and a memory timeline
# (JSON) begin: a file whose first inflated bytes are neither is refused before the rest is inflated (a gzip
# of zeros given as a snapshot inflated 2.5 GB before the unpickler said no).
SNAPSHOT_STARTS = tuple(bytes([0x80, protocol]) for protocol in range(2, 6)) + (b"[", b"{")
_HEAD_BYTES = 64


def read_bytes(path: Path, starts: tuple = SNAPSHOT_STARTS) -> bytes:
    """The file's bytes, gunzipped when gzip; either way at most MAX_DECOMPRESSED_BYTES, and refused as soon
    as its first bytes show it is none of what it should be (``starts``, after any whitespace for JSON)."""
    try:
        if not path.is_file():
            raise TraceError(path, "not a regular file" if path.exists() else "file not found")
        if path.stat().st_size > MAX_DECOMPRESSED_BYTES.value():
            raise TraceError(path, MAX_DECOMPRESSED_BYTES.refusal(f"the file's {path.stat().st_size:,} bytes"))
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot read the file: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        return _gunzip(path, data, starts)
    _check_start(path, data, starts)
    return data


def _check_start(path: Path, head: bytes, starts: tuple) -> None:
    if head and not head.lstrip(b" \t\r\n").startswith(starts) and len(head.lstrip(b" \t\r\n")) >= 2:
        raise TraceError(path, f"not a CUDA memory snapshot or memory timeline: it starts with {head[:8]!r} (a "
                         "snapshot is a pickle, which starts with b'\\x80', a timeline JSON); refused before "
                         "reading the rest", _FIX)


def _gunzip(path: Path, data: bytes, starts: tuple) -> bytes:
    """Every gzip member of ``data``, inflated, refusing as soon as the output passes the limit or its first
    bytes are not what ``starts`` allows."""
    limit = MAX_DECOMPRESSED_BYTES.value()
    out, rest = bytearray(), data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            if not out:
                out += inflater.decompress(rest, _HEAD_BYTES)
                _check_start(path, bytes(out), starts)
                rest = inflater.unconsumed_tail
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise TraceError(path, f"gzip data is damaged: {exc}", "re-copy the file") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise TraceError(path, MAX_DECOMPRESSED_BYTES.refusal("the decompressed file"))
        if not inflater.eof:
            raise TraceError(path, "gzip data is damaged: the stream is truncated", "re-copy the file")
        rest = inflater.unused_data
    return bytes(out)


class _RestrictedUnpickler(pickle.Unpickler):
    """Refuses every global: memory snapshots are built from plain containers only."""

    def __init__(self, file, path):
        super().__init__(file)
        self._path = path

    def find_class(self, module, name):
        raise TraceError(self._path, f"the file tries to construct `{module}.{name}` and was refused",
                         "CUDA memory snapshots contain only dicts, lists, strings and numbers; "
                         "this file is not one (or was tampered with): do not load it with pickle")


def unpickle(path: Path, data: bytes):
    """The plain containers a snapshot pickle holds; see the module docstring for the checks."""
    _check_opcodes(path, data)
    try:
        return _RestrictedUnpickler(io.BytesIO(data), path).load()
    except TraceError:
        raise
    except Exception as exc:  # UnpicklingError, EOFError, ValueError, MemoryError...: all mean "not a snapshot"
        raise TraceError(path, f"cannot unpickle: {type(exc).__name__}: {exc}",
                         "the file is truncated or not a memory snapshot") from None


def _opcode_args() -> list:
    table = [None] * 256
    for op in pickletools.opcodes:
        table[ord(op.code)] = op.arg.n if op.arg is not None else 0
    return table


_ARGS = _opcode_args()
_PUT, _LONG_BINPUT, _STOP = ord("p"), ord("r"), ord(".")
_TWO_LINES = (ord("c"), ord("i"))  # GLOBAL and INST read "module\nname\n"
_LENGTH_BYTES = {pickletools.TAKEN_FROM_ARGUMENT1: 1, pickletools.TAKEN_FROM_ARGUMENT4: 4,
                 pickletools.TAKEN_FROM_ARGUMENT4U: 4, pickletools.TAKEN_FROM_ARGUMENT8U: 8}


def _check_opcodes(path: Path, data: bytes) -> None:
    """Walk the opcodes: arguments must lie inside ``data``, memo indices below ``len(data)``.
    About 30 ns per byte of pickle; builds nothing."""
    pos, end, code = 0, len(data), None
    while pos < end:
        code = data[pos]
        n, pos = _ARGS[code], pos + 1
        if n is None:
            return  # an unknown opcode: the unpickler reports it
        if n > 0:
            if code == _LONG_BINPUT:
                _check_memo(path, int.from_bytes(data[pos:pos + 4], "little"), end)
            pos += n
        elif n == pickletools.UP_TO_NEWLINE:
            line_end = data.find(b"\n", pos)
            if line_end < 0:
                break
            if code == _PUT:
                _check_memo(path, _decimal(data[pos:line_end]), end)
            elif code in _TWO_LINES:
                line_end = data.find(b"\n", line_end + 1)
                if line_end < 0:
                    break
            pos = line_end + 1
        elif n in _LENGTH_BYTES:
            size = _LENGTH_BYTES[n]
            pos += size + int.from_bytes(data[pos:pos + size], "little")
        elif code == _STOP:
            return
    if data and (pos > end or code != _STOP):
        raise TraceError(path, "cannot unpickle: the pickle is truncated", "the file is truncated or not a memory snapshot")


def _decimal(text: bytes) -> int:
    try:
        return int(text[:20])
    except ValueError:
        return 0  # the unpickler reports the bad PUT argument


def _check_memo(path: Path, index: int, size: int) -> None:
    if index >= size:
        raise TraceError(path, f"cannot unpickle: memo index {index:,} is beyond a {size:,}-byte pickle",
                         "the file was crafted or damaged; it is not a memory snapshot")


class SnapshotReader:
    """Turns unpickled snapshot containers into columns, checking types and the expansion.

    ``what``/``fix`` word the errors (a snapshot, or a profiler memory timeline).
    """

    def __init__(self, path: Path, what: str = "snapshot", fix: str = _FIX):
        self.path, self.what, self.fix = path, what, fix
        self._block_ends = self._event_ends = np.zeros(0, dtype=np.int64)

    def fail(self, where: str, problem: str):
        raise TraceError(self.path, f"malformed {self.what}: {where} {problem}", self.fix)

    def items(self, value, kind: type, where: str):
        if not isinstance(value, kind):
            self.fail(where, f"is {describe(value)}, not a {kind.__name__}")
        return value

    def check_expansion(self, segments: list, device_traces: list) -> tuple[list, list]:
        """(blocks as (segment, block) pairs, events as (device, event) pairs), refusing before
        they are listed when their count, with their frames, exceeds SNAPSHOT_MAX_ITEMS."""
        limit = SNAPSHOT_MAX_ITEMS.value()
        segs = [self.items(s, dict, f"segments[{i}]") for i, s in enumerate(segments)]
        block_lists = [self.items(s.get("blocks", []), list, f"segments[{i}].blocks") for i, s in enumerate(segs)]
        traces = [self.items(t, list, f"device_traces[{d}]") for d, t in enumerate(device_traces)]
        self._block_ends = np.cumsum([len(b) for b in block_lists], dtype=np.int64)
        self._event_ends = np.cumsum([len(t) for t in traces], dtype=np.int64)
        rows = len(segs) + int(self._block_ends[-1:].sum()) + int(self._event_ends[-1:].sum())
        if rows > limit:
            raise TraceError(self.path, SNAPSHOT_MAX_ITEMS.refusal(f"{rows:,} segments, blocks and history events"))
        blocks = [(s, self.items(b, dict, f"segments[{i}].blocks[{j}]"))
                  for i, (s, bl) in enumerate(zip(segs, block_lists)) for j, b in enumerate(bl)]
        events = [(d, self.items(e, dict, f"device_traces[{d}][{k}]")) for d, t in enumerate(traces) for k, e in enumerate(t)]
        frames = sum(len(x["frames"]) for _, x in blocks + events if isinstance(x.get("frames"), list))
        if rows + frames > limit:
            raise TraceError(self.path, SNAPSHOT_MAX_ITEMS.refusal(f"{rows:,} rows and {frames:,} stack frames"))
        return blocks, events

    def block_at(self, i: int) -> str:
        """Where the ``i``-th block (in segment order) is: ``segments[s].blocks[b]``."""
        return _nested("segments[{}].blocks[{}]", self._block_ends, i)

    def event_at(self, i: int) -> str:
        """Where the ``i``-th history event is: ``device_traces[d][k]``."""
        return _nested("device_traces[{}][{}]", self._event_ends, i)

    def ints(self, rows: list, key, where, default=0) -> np.ndarray:
        """Field ``key`` of each row (a dict or a list) as int64; raises naming the first row whose
        value is not an int within int64. ``where(i)`` names row ``i``."""
        values = [_get(r, key, default) for r in rows]
        lo, hi = INT64_RANGE
        if set(map(type, values)) <= {int} and (not values or (lo <= min(values) and max(values) <= hi)):
            return np.array(values, dtype=np.int64)
        i = next(i for i, v in enumerate(values) if type(v) is not int or not lo <= v <= hi)
        self._bad(rows[i], key, where(i), values[i], "an integer within int64")

    def strings(self, rows: list, key, where, default="") -> list:
        values = [_get(r, key, default) for r in rows]
        if set(map(type, values)) <= {str}:
            return values
        i = next(i for i, v in enumerate(values) if type(v) is not str)
        self._bad(rows[i], key, where(i), values[i], "a string")

    def _bad(self, row, key, where: str, value, wanted: str):
        missing = isinstance(row, dict) and key not in row
        self.fail(f"{where}[{key!r}]", f"{'is missing' if missing else 'is ' + describe(value)}, not {wanted}")


def _get(row, key, default):
    return row.get(key, default) if isinstance(row, dict) else row[key]


def _nested(pattern: str, ends: np.ndarray, i: int) -> str:
    outer = int(np.searchsorted(ends, i, side="right"))
    return pattern.format(outer, i - (int(ends[outer - 1]) if outer else 0))


def describe(value) -> str:
    """A short description of any unpickled value that never builds a huge string."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else f"an integer of {value.bit_length():,} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:30]) + ("..." if len(value) > 30 else "")
    size = f" of {len(value):,} items" if hasattr(value, "__len__") else ""
    return f"a {type(value).__name__}{size}"


def frame_site(frames) -> str:
    """"file:line:name" of the frame that best says who allocated (frames innermost first):

    1. a Python frame in ``torch/optim/``: optimizer state or its step's temporaries, named so
       (the user frame above it is only the ``optimizer.step()`` line);
    2. the first Python frame outside torch and site-packages (the user code that allocated);
    3. the first Python frame;
    4. backward allocations have no Python frame: the autograd node that ran
       (``torch::autograd::generated::MmBackward0::apply``);
    5. the first C++ frame that is not the unwinder, the allocator, tensor creation, the dispatcher,
       the interpreter or an unnamed ``??`` frame (shown by its function alone when it has no file);
       then the first frame.
    Frame fields that are not a string (file, name) or an int (line) show as ``?``.
    """
    frames = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
    files = [_label(f.get("filename")) for f in frames]
    names = [_label(f.get("name")) for f in frames]
    py = [i for i, name in enumerate(files) if name.endswith(".py")]
    optim = [i for i in py if any(part in files[i] for part in _OPTIM)]
    user = [i for i in py if not any(part in files[i] for part in _NOT_USER)]
    native = [i for i, f in enumerate(files) if not f.endswith(".py") and _meaningful(names[i])]
    node = [i for i in native if _AUTOGRAD_NODE.search(names[i])]
    pick = (optim or user or py or node or native or list(range(len(frames))) or [None])[0]
    if pick is None:
        return ""
    if pick in native and files[pick] in ("", "??"):
        return names[pick]   # a C++ frame without debug info: its function says it all
    line = frames[pick].get("line", 0)
    line = line if type(line) is int and abs(line) < 2**63 else "?"
    return f"{files[pick]}:{line}:{names[pick]}"


def is_optimizer_site(site: str) -> bool:
    """Whether an allocation site (``frame_site``) is in torch.optim: optimizer state."""
    return any(part in site for part in _OPTIM)


def _meaningful(name: str) -> bool:
    return name not in ("", "?", "??") and _MACHINERY.search(name) is None


def _label(value) -> str:
    return value if isinstance(value, str) else "?"
