"""The ``Trace``: one or more profiler files loaded into typed tables.

A Trace holds the events table (schema in :mod:`perfkit.trace.schema`), the flows table, one
``TraceFile`` of metadata per source file, the profiler steps and the warnings raised while loading.
It is read-only in use: analyses take a Trace and return results, they never modify it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..errors import ParameterError
from .names import as_text
from .schema import GPU_CATEGORIES, LAUNCH_CATEGORIES


@dataclass(frozen=True)
class TraceFile:
    """Metadata of one source file.

    ``rank`` is the file's rank id in the Trace, distinct per file; ``claimed_rank`` is what the
    file's ``distributedInfo.rank`` says (None: nothing usable). They differ when several files
    claim one rank (see ``perfkit.trace.loader.jobs.assign_ranks``) or when a file claims none.
    """

    path: str
    rank: int
    claimed_rank: int | None = None
    schema_version: object = None
    base_time_ns: int | None = None
    trace_name: str = ""
    devices: tuple = ()
    distributed: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    recorder: dict = field(default_factory=dict)  # what ``perfkit profile`` wrote (``perfkit_profile``), {} if none
    events_read: int = 0

    @property
    def has_python_stacks(self) -> bool:
        return bool(self.flags.get("with_stack"))


_ALL_LINKED = (*GPU_CATEGORIES, "cuda_sync")  # what ``Trace.launches`` links by default


class Trace:
    """Events, flows, metadata and steps of one or more profiler trace files."""

    def __init__(self, events: pd.DataFrame, flows: pd.DataFrame, files: list[TraceFile],
                 steps: pd.DataFrame, warnings: list[str]):
        self.events = events
        self.flows = flows
        self.files = tuple(files)
        self.steps = steps
        self.warnings = tuple(warnings)
        self._derived: dict = {}  # key -> (the events and steps tables it was built from, the value)

    def __repr__(self) -> str:
        paths = ", ".join(f.path.rsplit("/", 1)[-1] for f in self.files[:3])
        more = f" +{len(self.files) - 3} files" if len(self.files) > 3 else ""
        return (f"<Trace {paths}{more}: {len(self.events):,} events, ranks {self.ranks}, "
                f"{len(self.steps)} steps, {len(self.warnings)} warnings>")

    @property
    def ranks(self) -> list[int]:
        return sorted({f.rank for f in self.files})

    @property
    def devices(self) -> list[dict]:
        """deviceProperties of the first file that has them (every rank sees the same GPUs)."""
        return next((list(f.devices) for f in self.files if f.devices), [])

    @property
    def backend(self) -> str:
        """"rocm" (HIP runtime calls, or a device with a 64-wide wavefront), "cuda" (CUDA runtime
        calls or GPU events) or "cpu" (neither)."""
        runtime = self.events.loc[self.events["cat"].isin(LAUNCH_CATEGORIES), "name"]
        names = runtime.cat.categories if isinstance(runtime.dtype, pd.CategoricalDtype) else runtime.unique()
        used = set(runtime.unique().tolist()) if len(runtime) else set()
        if any(str(n).startswith("hip") for n in names if n in used) \
                or any(isinstance(d, dict) and d.get("warpSize") == 64 for d in self.devices):
            return "rocm"
        return "cuda" if used or self.has_gpu_events else "cpu"

    @property
    def has_gpu_events(self) -> bool:
        return bool(self.events["cat"].isin(GPU_CATEGORIES).any())

    @property
    def has_python_stacks(self) -> bool:
        return bool((self.events["cat"] == "python_function").any())

    def select(self, *categories: str) -> pd.DataFrame:
        """Complete events of the given normalized categories."""
        ev = self.events
        return ev[(ev["ph"] == "X") & ev["cat"].isin(categories)]

    def kernels(self) -> pd.DataFrame:
        return self.select("kernel")

    def gpu_events(self) -> pd.DataFrame:
        """Kernels, memcpys and memsets: the intervals during which a GPU does work."""
        return self.select(*GPU_CATEGORIES)

    def launches(self, gpu_categories: tuple = _ALL_LINKED) -> pd.DataFrame:
        """CPU launch -> GPU activity links, one row per GPU event whose launch is in the trace.

        ``gpu_categories``: the GPU-side categories to link (default: kernels, copies, memsets and
        cuda_sync events; fewer is faster on large traces). Columns: ``cpu_index`` / ``gpu_index`` (labels in ``events``), ``file_id``, ``correlation``,
        ``launch_name``, ``gpu_name``, ``gpu_cat``, ``launch_ts_us``, ``launch_dur_us``, ``gpu_ts_us``,
        ``gpu_dur_us``, ``queue_delay_us`` (GPU start minus launch start). Links are joined on
        (file, correlation id); GPU events without a correlation id are linked through ``ac2g`` flow
        events (same id from the launch's start to the GPU event's start) where the trace has them.
        Built once per events table and categories (several analyses of one command ask for it),
        and taken from the links of every category once those are built; each call returns its own
        copy.
        """
        key = tuple(gpu_categories)
        built = self._built(("launches", _ALL_LINKED))
        if built is not None and set(key) <= set(_ALL_LINKED):
            # The links of fewer categories are rows of all links (each row links one GPU event).
            return built[built["gpu_cat"].isin(key).to_numpy()].reset_index(drop=True)
        return self.derived(("launches", key), lambda trace: trace._link_launches(key)).copy()

    def _built(self, key):
        """The value ``derived`` holds for ``key`` if it is current, else None."""
        built = self._derived.get(key)
        return built[2] if built is not None and built[0] is self.events and built[1] is self.steps else None

    def derived(self, key, build):
        """``build(self)``, computed once per events and steps tables and ``key`` (several analyses
        of one command ask for the same table). The value is shared: callers copy what they modify."""
        value = self._built(key)
        if value is None:
            value = build(self)
            self._derived[key] = (self.events, self.steps, value)
        return value

    def _link_launches(self, gpu_categories: tuple) -> pd.DataFrame:
        ev = self.events
        complete = (ev["ph"] == "X").to_numpy()
        columns = ["file_id", "pid", "tid", "correlation", "name", "cat", "ts_us", "dur_us"]
        gpu = _fill_correlation_from_flows(ev.loc[complete & ev["cat"].isin(gpu_categories).to_numpy(), columns],
                                           self.flows)
        wanted = ev["correlation"].isin(gpu.loc[gpu["correlation"] >= 0, "correlation"].unique()).to_numpy()
        cpu = ev.loc[complete & ev["cat"].isin(LAUNCH_CATEGORIES).to_numpy() & wanted, columns]
        left = cpu[["file_id", "correlation", "name", "ts_us", "dur_us"]].reset_index(names="cpu_index")
        right = gpu[gpu["correlation"] >= 0][["file_id", "correlation", "name", "cat", "ts_us", "dur_us"]]
        right = right.reset_index(names="gpu_index")
        left = left.drop_duplicates(["file_id", "correlation"])
        out = right.merge(left, on=["file_id", "correlation"], suffixes=("_gpu", "_cpu"))
        out = out.rename(columns={
            "name_cpu": "launch_name", "name_gpu": "gpu_name", "cat": "gpu_cat", "ts_us_cpu": "launch_ts_us",
            "dur_us_cpu": "launch_dur_us", "ts_us_gpu": "gpu_ts_us", "dur_us_gpu": "gpu_dur_us",
        })
        out["queue_delay_us"] = out["gpu_ts_us"] - out["launch_ts_us"]
        for col in ("launch_name", "gpu_name", "gpu_cat"):
            out[col] = as_text(out[col])
        return out[["cpu_index", "gpu_index", "file_id", "correlation", "launch_name", "gpu_name", "gpu_cat",
                    "launch_ts_us", "launch_dur_us", "gpu_ts_us", "gpu_dur_us", "queue_delay_us"]]

    def require(self, *columns: str) -> None:
        missing = [c for c in columns if c not in self.events.columns]
        if missing:
            raise ParameterError(f"trace events lack columns {missing}; reload the trace with this perfkit version")


def _fill_correlation_from_flows(gpu: pd.DataFrame, flows: pd.DataFrame) -> pd.DataFrame:
    """GPU events with no correlation id get the id of the launch flow that ends at their start."""
    missing = gpu["correlation"] < 0
    if not missing.any() or flows.empty:
        return gpu
    ends = flows[flows["ph"] == "f"][["file_id", "pid", "tid", "ts_us", "id"]]
    key = gpu.loc[missing, ["file_id", "pid", "tid", "ts_us"]].reset_index()
    key[["pid", "tid"]] = key[["pid", "tid"]].astype(str)
    ends = ends.assign(pid=ends["pid"].astype(str), tid=ends["tid"].astype(str))
    matched = key.merge(ends, on=["file_id", "pid", "tid", "ts_us"]).drop_duplicates("index")
    gpu = gpu.copy()
    gpu.loc[matched["index"].to_numpy(), "correlation"] = matched["id"].to_numpy()
    return gpu


def recorded_on(trace) -> str:
    """The device a trace was recorded on, from the trace: the first GPU's name ("cuda" or "rocm"
    when unnamed; a ROCm GPU's name followed by "(rocm)"), "<name> (GPU activity not recorded)" for a
    trace that lists GPUs and launched work but recorded no GPU events, or "cpu"."""
    backend = trace.backend
    named = [d.get("name") for d in trace.devices if isinstance(d, dict) and d.get("name")]
    if not trace.has_gpu_events:
        return f"{named[0]} (GPU activity not recorded)" if named and backend != "cpu" else "cpu"
    if not named:
        return backend
    return f"{named[0]} (rocm)" if backend == "rocm" else named[0]
