"""perfkit's critical path against Holistic Trace Analysis's ``critical_path_analysis`` on the
shared critical-path traces.

HTA needs ``pandas<3``, so it runs in a throwaway virtual environment outside the repository:

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis 'pandas<3'
    python benchmarks/hta_critical_path.py --hta-python /tmp/hta-venv/bin/python

For each case (a trace and the annotation window HTA's own tests use) it prints HTA's path length
and its breakdown (``bound_by``: cpu_bound, gpu_compute_bound, gpu_kernel_launch_overhead,
gpu_kernel_kernel_overhead), perfkit's path over the same window by kind, and the ratios. HTA's
path skips time that no operator covers (zero-weight dependency edges); perfkit counts that time
as ``idle``, so HTA's length is compared with perfkit's path minus idle.
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
HTA_CHILD = r'''
import json, logging, os, shutil, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
src, annotation, instance = sys.argv[1], sys.argv[2], int(sys.argv[3])
folder = tempfile.mkdtemp()
shutil.copy(src, folder)
t0 = time.perf_counter()
graph, ok = TraceAnalysis(trace_dir=folder).critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
df = graph.get_critical_path_breakdown()
print(json.dumps({"ok": bool(ok), "seconds": time.perf_counter() - t0, "length_us": float(df.duration.sum()),
                  "bound_by": {k or "dependency": float(v) for k, v in df.groupby("bound_by").duration.sum().items()}}))
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

    from perfkit.analysis.step.critical_path import KINDS, critical_path
    from perfkit.trace import load_trace

    trace = load_trace(path)
    t0 = time.perf_counter()
    steps = critical_path(trace, annotation=annotation).steps
    row = steps[steps["step"] == instance].iloc[0]
    return {"seconds": time.perf_counter() - t0, "wall_us": float(row["wall_us"]), "path_us": float(row["path_us"]),
            "by_kind": {k: float(row[f"{k}_us"]) for k in KINDS}}


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
    hta_bound, pk_bound = dominant_hta(h), dominant_perfkit(k)
    lines.append(f"  dominant bound: HTA {hta_bound}, perfkit {pk_bound}" + ("" if hta_bound == pk_bound else "  (differ)"))
    lines.append(f"  HTA launch + kernel-kernel overhead {h.get('gpu_kernel_launch_overhead', 0.0):,.0f} + "
                 f"{h.get('gpu_kernel_kernel_overhead', 0.0):,.0f} us; perfkit launch {k['launch']:,.0f} us, "
                 f"idle {k['idle']:,.0f} us of a {pk['wall_us']:,.0f} us window")
    return lines


def dominant_hta(bound_by: dict) -> str:
    """compute / communication / host: the largest of HTA's groups (kernel-kernel overhead is the GPU
    waiting between kernels on the path: host, like launch overhead)."""
    groups = {"compute": bound_by.get("gpu_compute_bound", 0.0),
              "communication": bound_by.get("gpu_communication_bound", 0.0),
              "host": bound_by.get("cpu_bound", 0.0) + bound_by.get("gpu_kernel_launch_overhead", 0.0)
              + bound_by.get("gpu_kernel_kernel_overhead", 0.0)}
    return max(groups, key=groups.get)


def dominant_perfkit(by_kind: dict) -> str:
    """The same three groups of perfkit's kinds (idle left out, as HTA's path skips it)."""
    groups = {"compute": by_kind["kernel"] + by_kind["memcpy"], "communication": by_kind.get("comm", 0.0),
              "host": by_kind["host"] + by_kind["launch"] + by_kind["sync_wait"]}
    return max(groups, key=groups.get)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hta-python", required=True, help="python of a venv with HolisticTraceAnalysis and pandas<3")
    args = ap.parse_args(argv)
    for name, annotation, instance in CASES + TRAINING:
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
