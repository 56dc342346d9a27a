"""torch.compile in a trace: the host spans that are compilation, the compiled regions that ran,
and the kernels Triton generated. ``cpu_bound`` (the "compiling" verdict) and ``summary`` (key
``compile``) both classify events through this module, so a rule changes in one place.

**Compile work** (``is_compile_span``) is what Dynamo, AOTAutograd, Inductor and Triton do to
*build* compiled code, once per graph (and again on each recompile):

* ``<key> (dynamo_timed)`` ranges: torch wraps every timed compile phase in a record_function of
  that name (``torch/_dynamo/utils.py: dynamo_timed``; ``cpu_op`` in torch 2.13, ``user_annotation``
  in older releases): ``_compile.compile_inner``, ``OutputGraph.call_user_compiler``,
  ``compile_fx_inner``, ``GraphLowering.compile_to_module``, ``Scheduler.codegen``,
  ``async_compile.wait``, ``backward._backward_impl`` (lazy backward compile),
  ``CachingAutotuner.benchmark_all_configs`` (autotuning on first run), ... except
  ``guard_collective``, which runs a collective on *every* guarded call;
* with ``with_stack=True``, the Python frames of the same phases (``COMPILE_FRAMES``), which is
  all there is in traces from releases without ``dynamo_timed`` ranges.

**Not** compile work: the run-time wrappers of compiled code, which run on every call:
``Torch-Compiled Region: N/M``, ``CompiledFunction`` / ``CompiledFunctionBackward``,
``## Call CompiledFxGraph <hash> ##``, ``TorchDynamo Cache Lookup``, ``eval_frame.py: _fn``, and
Triton's launch path (``triton/compiler/compiler.py: launch_metadata``, ``_init_handles``,
``LazyDict.__init__``; checked on tracelens_mi300x_xdit_sd35_compiled, whose 2,076 such frames
are launches of already compiled kernels).

**Compiled regions**: the distinct ``Torch-Compiled Region: N/M`` names, N the compiled frame
(a function, or a resume function Dynamo made after a graph break) and M its recompile count. A
trace does not record graph breaks; more regions than compiled functions are their sign.

**Triton kernels**: kernel names starting with ``triton_`` (Inductor's ``triton_poi_``,
``triton_red_``, ``triton_per_``, ``triton_tem_``); hand-written ``@triton.jit`` kernels keep their
own names and are not counted.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.intervals import union

DYNAMO_TIMED_SUFFIX = " (dynamo_timed)"
# dynamo_timed keys that run on every call of compiled code, not while compiling.
RUNTIME_DYNAMO_TIMED = frozenset({"guard_collective"})
# python_function frames ("path/file.py(line): func") of compile phases; paths normalized to "/".
COMPILE_FRAMES = re.compile(
    r"(?:^|/)(?:"
    r"torch/_dynamo/convert_frame\.py\(\d+\): (?:_compile|compile_inner|_compile_inner|compile_frame)"
    r"|torch/_functorch/aot_autograd\.py\(\d+\): (?:create_aot_dispatcher_function|aot_module_simplified)"
    r"|torch/_inductor/compile_fx\.py\(\d+\): (?:compile_fx|compile_fx_inner|_compile_fx_inner|fx_codegen_and_compile)"
    r"|torch/_inductor/graph\.py\(\d+\): (?:compile_to_module|_compile_to_module|codegen)"
    r"|torch/_inductor/async_compile\.py\(\d+\): (?:wait|triton|_wait_futures)"
    r"|torch/_inductor/runtime/triton_heuristics\.py\(\d+\): (?:precompile|benchmark_all_configs)"
    r"|triton/compiler/compiler\.py\(\d+\): compile"
    r")$")
COMPILE_CATEGORIES = ("cpu_op", "user_annotation", "python_function")
REGION_PREFIX = "Torch-Compiled Region"
TRITON_PREFIX = "triton_"


def is_compile_span(name: str) -> bool:
    """Whether a host event or Python frame of this name is compile work (see the module doc)."""
    if name.endswith(DYNAMO_TIMED_SUFFIX):
        return name[: -len(DYNAMO_TIMED_SUFFIX)] not in RUNTIME_DYNAMO_TIMED
    return COMPILE_FRAMES.search(name.replace("\\", "/")) is not None


def name_mask(names: pd.Series, predicate) -> np.ndarray:
    """``predicate(name)`` for every row, evaluated once per distinct name (categorical names)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = np.array([bool(predicate(str(c))) for c in names.cat.categories], dtype=bool)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, hits[np.clip(codes, 0, None)] if len(hits) else False, False)
    unique = pd.unique(names.astype(str))
    hits = {n: bool(predicate(n)) for n in unique}
    return names.astype(str).map(hits).to_numpy(dtype=bool)


def compile_spans(trace) -> pd.DataFrame:
    """Complete host events (``COMPILE_CATEGORIES``) of ``trace`` that are compile work: rows of
    ``trace.events`` (``rank``, ``ts_us``, ``dur_us``, ``name``, ...), found once per trace (shared:
    copy before changing it). Nested spans overlap: take their union (``compile_us``), never their sum."""
    return trace.derived("compile_spans", _compile_spans)


def _compile_spans(trace) -> pd.DataFrame:
    ev = trace.events
    # Names tested first, rows copied once: the categories hold a million python_function frames.
    spans = (ev["ph"] == "X").to_numpy() & ev["cat"].isin(COMPILE_CATEGORIES).to_numpy() \
        & name_mask(ev["name"], is_compile_span)
    return ev[spans]


def compile_us(spans: pd.DataFrame) -> float:
    """Union of the spans' intervals per rank, summed over ranks (us)."""
    total = 0.0
    for _, grp in spans.groupby("rank", observed=True, sort=False):
        start = grp["ts_us"].to_numpy(dtype=np.float64)
        bs, be = union(start, start + grp["dur_us"].to_numpy(dtype=np.float64))
        total += float((be - bs).sum())
    return total


def compiled_regions(trace) -> list[str]:
    """Distinct ``Torch-Compiled Region: N/M`` names that ran in the trace, sorted."""
    ev = trace.events
    # Names tested first (once per distinct name), then only the matching rows read.
    rows = name_mask(ev["name"], lambda n: n.startswith(REGION_PREFIX))
    rows[rows] &= (ev["ph"][rows] == "X").to_numpy() & ev["cat"][rows].isin(("cpu_op", "user_annotation")).to_numpy()
    return sorted(set(ev["name"][rows].astype(str)))


def is_triton_kernel(name: str) -> bool:
    return name.startswith(TRITON_PREFIX)


def compile_facts(trace) -> dict | None:
    """``{kernels, triton_kernels, triton_time_share, compile_s, compiled_regions}`` of the whole
    trace, or None when it shows no sign of torch.compile (no compile span, compiled region or
    Triton kernel). ``triton_time_share``: Triton kernel time / all kernel time (0-1, None without
    kernel time); ``compile_s``: union of compile spans in seconds; ``compiled_regions``: count of
    distinct ``Torch-Compiled Region: N/M`` names."""
    facts = trace.derived("compile_facts", _compile_facts)
    return None if facts is None else dict(facts)


def _compile_facts(trace) -> dict | None:
    kernels = trace.kernels()
    triton = name_mask(kernels["name"], is_triton_kernel)
    regions = compiled_regions(trace)
    seconds = compile_us(compile_spans(trace)) / 1e6
    if not (triton.any() or regions or seconds > 0):
        return None
    total_us = float(kernels["dur_us"].sum())
    return {"kernels": int(len(kernels)), "triton_kernels": int(triton.sum()),
            "triton_time_share": float(kernels["dur_us"][triton].sum()) / total_us if total_us > 0 else None,
            "compile_s": seconds, "compiled_regions": len(regions)}


def regions_note(n_regions: int) -> str:
    """What the count of compiled regions says about graph breaks, for the text outputs."""
    if n_regions == 0:
        return ("no Torch-Compiled Region ran: the Triton kernels come from a library or a runtime that calls "
                "compiled graphs itself (vLLM's piecewise CUDA graphs, AOTInductor)")
    if n_regions == 1:
        return "one compiled region: no sign of graph breaks or recompiles"
    return (f"{n_regions} compiled regions: more than one per compiled function means graph breaks (each break "
            "starts a new region) or recompiles; a trace does not record which: run with "
            "TORCH_LOGS=graph_breaks,recompiles")
