"""The written schema of perfkit's event table, and category normalization.

Events table (``Trace.events``), one row per complete (``ph == "X"``), instant (``"i"``) or counter
(``"C"``) event:

============== ======== =============================================================
column         dtype    meaning
============== ======== =============================================================
name           category event name, verbatim (a string; never an integer id)
cat            category normalized category (see ``CATEGORY_ALIASES``)
ph             category Chrome-trace phase: "X" complete, "i" instant, "C" counter sample (its
                        values, in ``args``, are not kept: the row marks when a counter changed)
ts_us          float64  start, microseconds since the epoch the trace uses
dur_us         float64  duration in microseconds (0 for instant events and counter samples)
pid            category process id as written (GPU events: device id), as a string
tid            category thread id as written (GPU events: stream), as a string
file_id        int16    index of the source file in ``Trace.files``
rank           int32    rank id, distinct per file (``distributedInfo.rank`` unless an earlier file claimed it: runs.assign_ranks)
device         int16    GPU index for GPU-side events, -1 for host events
stream         int32    CUDA/HIP stream for GPU-side events, -1 for host events
correlation    int64    runtime<->GPU correlation id, -1 when absent
external_id    int64    op<->runtime external id, -1 when absent
bytes          int64    bytes moved by a memcpy/memset (GPU side) or a sync runtime copy, -1 when absent
python_id      int64    ``Python id`` of a python_function event, -1 otherwise
python_parent  int64    ``Python parent id`` of a python_function event, -1 otherwise
alloc_bytes    int64    ``Bytes`` of a ``[memory]`` instant event (negative = free), 0 otherwise
parent         int64    row label (in ``Trace.events``) of the innermost enclosing host event on the
                        same thread, for host events (``NESTED_CATEGORIES``); for python_function
                        frames, the frame named by ``Python parent id``; -1 for roots and other events
depth          int32    number of ancestors along ``parent`` (0 = outermost); -1 for events outside
                        both trees (GPU-side, instant and other events)
step           int64    number of the file's step (``Trace.steps["step"]``) whose [start, end) holds
                        the start of a host event or python_function frame; -1 outside every step
                        and for all other events
============== ======== =============================================================

``Trace.events`` has a RangeIndex (a row's label is its position), which ``parent`` refers to.
``parent``, ``depth`` and ``step`` are computed once per file when it is parsed and cached with it;
the rules (start order, ties at whole microseconds, zero-duration events) are in
:mod:`perfkit.trace.nesting`.

Numbers outside the ranges of :mod:`perfkit.limits` (``ts``/``dur`` 0..2**53-1 us, ids within their
column's dtype) are never stored: such an event is dropped and counted in the trace's warnings.

Flows table (``Trace.flows``): ``id`` (int64), ``ph`` ("s"/"f"/"t"), ``cat``, ``pid``, ``tid``, ``ts_us``,
``file_id``: the arrows Kineto draws from a CPU launch to its GPU activity (``ac2g``; ``async`` and
``async_cpu_to_gpu`` in older traces) and between forward and backward ops (``fwdbwd``).
"""
from __future__ import annotations

# Bump when the table layout or its meaning changes: caches of another version are ignored.
SCHEMA_VERSION = 3  # 2: parent, depth and step columns; 3: counter ("C") events are kept

EVENT_COLUMNS = (
    "name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "file_id", "rank", "device", "stream",
    "correlation", "external_id", "bytes", "python_id", "python_parent", "alloc_bytes",
)
INT_COLUMNS = {
    "file_id": "int16", "rank": "int32", "device": "int16", "stream": "int32", "correlation": "int64",
    "external_id": "int64", "bytes": "int64", "python_id": "int64", "python_parent": "int64",
    "alloc_bytes": "int64",
}
NESTING_COLUMNS = ("parent", "depth", "step")
FLOW_COLUMNS = ("id", "ph", "cat", "pid", "tid", "ts_us", "file_id")

# Old (2021, torch-tb-profiler era) and alternative category spellings -> modern Kineto names.
CATEGORY_ALIASES = {
    "operator": "cpu_op",
    "cpu_op": "cpu_op",
    "runtime": "cuda_runtime",
    "cuda_runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "cuda_driver": "cuda_driver",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "gpu_memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_memset": "gpu_memset",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "python": "python_function",
    "python_function": "python_function",
    "cuda_sync": "cuda_sync",
    "cpu_instant_event": "cpu_instant_event",
    "trace": "trace",
}

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
# GPU-side events that carry device/stream/correlation (cuda_sync events live on the GPU timeline).
GPU_SIDE_CATEGORIES = GPU_CATEGORIES + ("cuda_sync", "gpu_user_annotation")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
# Host events that nest on a thread (``parent``/``depth``); python_function frames have their own tree.
NESTED_CATEGORIES = ("cpu_op", "user_annotation", *LAUNCH_CATEGORIES)
FLOW_CATEGORIES = ("ac2g", "async", "async_cpu_to_gpu", "fwdbwd")


# The pre-Kineto export of torch.autograd.profiler (a bare JSON array, no "cat"): its ops carry
# pid "CPU functions" and its kernels pid "CUDA functions". Events without a category are read by these.
LEGACY_PIDS = {"CPU functions": "cpu_op", "CUDA functions": "kernel"}


def normalize_category(cat, name: str) -> str:
    """Modern category for ``cat``; instant ``[memory]`` events without one become cpu_instant_event."""
    if not cat:
        return "cpu_instant_event" if name == "[memory]" else "marker"
    return CATEGORY_ALIASES.get(str(cat).lower(), str(cat))
