"""perfkit's critical path against Holistic Trace Analysis's ``critical_path_analysis`` on the
shared critical-path traces.

HTA needs ``pandas<3``, so it runs in a throwaway virtual environment outside the repository:

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis 'pandas<3'
    python benchmarks/hta_critical_path.py --hta-python /tmp/hta-venv/bin/python

For each case (a trace and the annotation window HTA's own tests use) it prints HTA's path length
and its breakdown (``bound_by``: cpu_bound, gpu_compute_bound, gpu_kernel_launch_overhead,
gpu_kernel_kernel_overhead), perfkit's path over the same window by kind, and the ratios. HTA's
path skips time that no operator covers (zero-weight dependency edges); perfkit counts that time
as ``idle``, so HTA's length is compared with perfkit's path minus idle. HTA runs on the rank the trace
records (``distributedInfo.rank``). Then HTA's path stretch by stretch (runs on one host thread or GPU
stream) beside perfkit's path on the same lane over the same span, and how much of HTA's kernel-kernel
overhead is a stream waiting for a collective on another stream. ``--only NAME`` runs the cases whose
trace name contains NAME. The agreement tables in docs/explaining.md come from this output.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared")) / "traces" / "public"
CASES = [  # (trace, annotation, instance): the windows of HTA's tests/test_critical_path_analysis.py
    ("hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    ("hta_critical_path__cuda_event_sync__event_sync_trace.json.gz", "ProfilerStep", 0),
]
TRAINING = [  # training steps: backward on the autograd thread, collectives on their own stream
    ("param_v100_dlrm_rank0.pt.trace.json.gz", "ProfilerStep", 0),
    ("param_v100_dlrm_rank3.pt.trace.json.gz", "ProfilerStep", 0),
    ("tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz", "ProfilerStep", 1),
    ("hta_trace_diff__control__control.json.gz", "ProfilerStep", 0),
    ("hta_trace_diff__test__test.json.gz", "ProfilerStep", 0),
    ("hta_nccl_parser_config__nccl_data.json.gz", "ProfilerStep", 0),
]
# A kernel queued behind an event on another stream starts 2-17 us after that work ends on these traces
# (DLRM V100, MI300X): 50 us leaves room without catching unrelated ends.
COLLECTIVE_SLACK_US = 50.0
HTA_CHILD = r'''
import gzip, json, logging, os, shutil, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
src, annotation, instance = sys.argv[1], sys.argv[2], int(sys.argv[3])
# HTA keys traces by the rank in distributedInfo: asking a rank-3 trace for rank 0 raises ValueError.
opener = gzip.open if src.endswith(".gz") else open
with opener(src, "rt") as fh:
    rank = int((json.load(fh).get("distributedInfo") or {}).get("rank", 0))
folder = tempfile.mkdtemp()
shutil.copy(src, folder)
analysis = TraceAnalysis(trace_dir=folder)
t0 = time.perf_counter()
graph, ok = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
df = graph.get_critical_path_breakdown()
seconds = time.perf_counter() - t0
# The path edge by edge, in trace time (HTA shifts ts by the trace's first timestamp), grouped into runs on one
# host thread or GPU stream; kernel-kernel delays apart, to see what the GPU waited for.
trace_df, shift, runs, gaps = graph.full_trace_df, float(analysis.t.min_ts), [], []
nodes = graph.critical_path_nodes
for u, v in zip(nodes[:-1], nodes[1:]):
    edge, a, b = graph.edges[u, v]["object"], graph.node_list[u], graph.node_list[v]
    stream, tid = int(trace_df.stream.loc[a.ev_idx]), int(trace_df.tid.loc[a.ev_idx])
    lane = f"stream {stream}" if stream >= 0 else f"thread {tid}"
    if edge.type.value.endswith("kernel_kernel_delay"):
        gaps.append([a.ts + shift, b.ts + shift, stream, float(edge.weight)])
    if runs and runs[-1][0] == lane:
        runs[-1][2], runs[-1][3] = b.ts + shift, runs[-1][3] + float(edge.weight)
    else:
        runs.append([lane, a.ts + shift, b.ts + shift, float(edge.weight)])
print(json.dumps({"ok": bool(ok), "rank": rank, "seconds": seconds, "length_us": float(df.duration.sum()),
                  "bound_by": {k or "dependency": float(v) for k, v in df.groupby("bound_by").duration.sum().items()},
                  "runs": runs, "gaps": gaps}))
'''


def run_hta(python: str, path: Path, annotation: str, instance: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(HTA_CHILD)
    proc = subprocess.run([python, fh.name, str(path), annotation, str(instance)], capture_output=True, text=True)
    os.unlink(fh.name)
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_perfkit(path: Path, annotation: str, instance: int) -> dict:
    import time

    from perfkit.analysis.classify import is_comm
    from perfkit.analysis.step.critical_path import KINDS, critical_path
    from perfkit.trace import load_trace

    trace = load_trace(path)
    t0 = time.perf_counter()
    result = critical_path(trace, annotation=annotation)
    seconds = time.perf_counter() - t0
    row = result.steps[result.steps["step"] == instance].iloc[0]
    seg = result.segments[result.segments["step"] == instance]
    gpu = trace.gpu_events()
    comm = gpu[(gpu["cat"] == "kernel").to_numpy() & is_comm(gpu["name"])]
    return {"seconds": seconds, "start_us": float(row["start_us"]), "wall_us": float(row["wall_us"]),
            "path_us": float(row["path_us"]), "by_kind": {k: float(row[f"{k}_us"]) for k in KINDS},
            "segments": seg[["kind", "start_us", "end_us", "lane"]].to_numpy().tolist(),
            "comm_ends": list(zip((comm["ts_us"] + comm["dur_us"]).tolist(), comm["stream"].tolist()))}


def compare(hta: dict, pk: dict) -> list[str]:
    k, h = pk["by_kind"], hta["bound_by"]
    pk_len = pk["path_us"] - k["idle"]
    pairs = [  # (what, HTA, perfkit)
        ("path length (perfkit minus idle)", hta["length_us"], pk_len),
        ("host + launch: cpu_bound+overheads / host+launch+sync_wait",
         h.get("cpu_bound", 0.0) + h.get("gpu_kernel_launch_overhead", 0.0) + h.get("gpu_kernel_kernel_overhead", 0.0),
         k["host"] + k["launch"] + k["sync_wait"]),
        ("GPU work: gpu_*_bound / kernel+comm+memcpy",
         h.get("gpu_compute_bound", 0.0) + h.get("gpu_communication_bound", 0.0),
         k["kernel"] + k.get("comm", 0.0) + k["memcpy"]),
    ]
    lines = [f"  {'':58s}{'HTA us':>10s}{'perfkit us':>12s}{'perfkit/HTA':>12s}"]
    for what, a, b in pairs:
        lines.append(f"  {what:58s}{a:10,.0f}{b:12,.0f}{(b / a if a else float('nan')):12.3f}")
    waits = collective_waits(hta, pk)
    hta_bound, pk_bound = dominant_hta(h), dominant_perfkit(k)
    lines.append(f"  dominant bound: HTA {hta_bound}, perfkit {pk_bound}" + ("" if hta_bound == pk_bound else "  (differ)"))
    if waits:
        lines.append(f"  HTA kernel-kernel overhead that ends when a collective on another stream ends: {waits:,.0f} us; "
                     f"counted as communication, HTA's dominant bound is {dominant_hta(h, waits)}")
    lines.append(f"  HTA launch + kernel-kernel overhead {h.get('gpu_kernel_launch_overhead', 0.0):,.0f} + "
                 f"{h.get('gpu_kernel_kernel_overhead', 0.0):,.0f} us; perfkit launch {k['launch']:,.0f} us, "
                 f"idle {k['idle']:,.0f} us of a {pk['wall_us']:,.0f} us window")
    return lines + stretches(hta, pk)


def collective_waits(hta: dict, pk: dict) -> float:
    """HTA's kernel-kernel delays in which the stream waited for a collective: the next kernel starts
    within ``COLLECTIVE_SLACK_US`` of the end of an NCCL/RCCL kernel on another stream that ended inside
    the gap (held by cudaStreamWaitEvent, not by the host)."""
    total = 0.0
    for start, end, stream, weight in hta.get("gaps", []):
        if any(max(start, end - COLLECTIVE_SLACK_US) < c_end <= end and c_stream != stream
               for c_end, c_stream in pk["comm_ends"]):
            total += weight
    return total


def stretches(hta: dict, pk: dict) -> list[str]:
    """HTA's path as runs on one thread or stream (ms from the window's start; runs under 2% of its
    length left out), each beside perfkit's path minus idle on the same lane over the same span; then
    the rest of perfkit's path (minus idle): on other lanes or at other times."""
    t0, lines = pk["start_us"], ["  stretches (ms from the window start): lane, HTA weight us, perfkit on that lane us"]
    shared = 0.0
    for lane, start, end, weight in hta.get("runs", []):
        mine = sum(min(e, end) - max(s, start) for kind, s, e, name in pk["segments"]
                   if kind != "idle" and _same_lane(lane, name) and min(e, end) > max(s, start))
        shared += mine
        if weight >= 0.02 * hta["length_us"]:
            lines.append(f"    {(start - t0) / 1e3:8.2f}-{(end - t0) / 1e3:8.2f}  {lane:16s} HTA {weight:9,.0f}  "
                         f"perfkit {mine:9,.0f}")
    rest = pk["path_us"] - pk["by_kind"]["idle"] - shared
    lines.append(f"    perfkit's path elsewhere (other lanes or times, minus idle): {rest:,.0f} us")
    return lines


def _same_lane(hta_lane: str, pk_lane: str) -> bool:
    what, number = hta_lane.split(" ")
    if what == "stream":
        return pk_lane.endswith(f"stream {number}")
    return pk_lane.split("/")[-1].split(":")[-1] == number


def dominant_hta(bound_by: dict, collective_wait_us: float = 0.0) -> str:
    """compute / communication / host: the largest of HTA's groups (kernel-kernel overhead is the GPU
    waiting between kernels on the path: host, like launch overhead, except ``collective_wait_us`` of it,
    the waits for a collective on another stream, counted as communication)."""
    groups = {"compute": bound_by.get("gpu_compute_bound", 0.0),
              "communication": bound_by.get("gpu_communication_bound", 0.0) + collective_wait_us,
              "host": bound_by.get("cpu_bound", 0.0) + bound_by.get("gpu_kernel_launch_overhead", 0.0)
              + bound_by.get("gpu_kernel_kernel_overhead", 0.0) - collective_wait_us}
    return max(groups, key=groups.get)


def dominant_perfkit(by_kind: dict) -> str:
    """The same three groups of perfkit's kinds (idle left out, as HTA's path skips it)."""
    groups = {"compute": by_kind["kernel"] + by_kind["memcpy"], "communication": by_kind.get("comm", 0.0),
              "host": by_kind["host"] + by_kind["launch"] + by_kind["sync_wait"]}
    return max(groups, key=groups.get)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hta-python", required=True, help="python of a venv with HolisticTraceAnalysis and pandas<3")
    ap.add_argument("--only", help="run only the cases whose trace name contains this")
    args = ap.parse_args(argv)
    for name, annotation, instance in CASES + TRAINING:
        if args.only and args.only not in name:
            continue
        path = SHARED / name
        if not path.exists():
            print(f"{path}: not found (the shared traces live in ../shared/traces/public)")
            continue
        hta, pk = run_hta(args.hta_python, path, annotation, instance), run_perfkit(path, annotation, instance)
        print(f"\n{name}\n  window: {annotation} #{instance}")
        if "error" in hta:
            print(f"  HTA failed: {hta['error']}")
            continue
        print("\n".join(compare(hta, pk)))
        print(f"  time: HTA {hta['seconds']:.2f} s (graph + longest path), perfkit {pk['seconds']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
