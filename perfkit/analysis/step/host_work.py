"""What the host computes in a step when it is not issuing GPU work, and the fix for each kind: random numbers
made on the CPU, allocation, any other op, Python, untraced time."""
from __future__ import annotations


# Host ops that make random numbers: made on the CPU and copied, they are host compute that the GPU
# could do in microseconds (torch.randn(..., device="cuda")).
RANDOM_OPS = ("aten::normal_", "aten::uniform_", "aten::randn", "aten::rand", "aten::randint", "aten::random_",
              "aten::bernoulli_", "aten::multinomial", "aten::randperm", "aten::exponential_")


# Ops that only allocate: long on the host when the caching allocator calls cudaMalloc.
ALLOC_OPS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resize_", "aten::new_empty",
             "aten::new_empty_strided")


def top_host_work(tables: dict, o: dict) -> dict:
    """What the host computed most in the steps: the non-launching op with the most time
    (``tables['host_ops']``), else Python frames, else untraced time. ``what``, ``share`` of the step
    (less warm-up), ``kind`` (op, python, untraced), ``name``."""
    wall = max(o["wall_us"] - o["warmup_us"], 1e-9)
    ops = tables.get("host_ops")
    candidates = [("python", "Python", o["python_us"]), ("untraced", "untraced host code", o["untraced_us"])]
    if ops is not None and len(ops):
        top = ops.iloc[0]
        candidates.append(("op", str(top["name"]), float(top["total_us"])))
    kind, name, us = max(candidates, key=lambda c: c[2])
    what = {"op": f"CPU op {name}", "python": "Python with no op under it", "untraced": "untraced host time"}[kind]
    return {"kind": kind, "name": name, "us": us, "share": us / wall, "what": what}


def host_compute_fix(top: dict, e: dict, stacks: bool) -> str:
    """The fix for a host-compute-bound step, by what the host computed most (``top_host_work``); ``stacks``: the
    trace has Python frames (no advice to record them)."""
    head = ("The host computes while the GPU waits; launching is not the cost "
            f"({e['launches_per_step']:,.0f} launches per step), so torch.compile's CUDA graphs or fusing kernels "
            "will not shorten the step. ")
    if top["kind"] == "op" and top["name"] in RANDOM_OPS:
        return head + (f"{top['name']} makes random numbers on the CPU: create them on the GPU "
                       "(torch.randn(..., device='cuda'), torch.rand_like on a GPU tensor) instead of on the host "
                       "and copying them.")
    if top["kind"] == "op" and top["name"] in ALLOC_OPS:
        return head + (f"{top['name']} is memory allocation: the caching allocator asking the driver for memory "
                       "(cudaMalloc/hipMalloc) inside the step. Allocate the buffers once outside the loop and reuse "
                       "them (out=, preallocated tensors), keep tensor sizes stable from step to step, or set "
                       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to cut fragmentation-driven allocations.")
    if top["kind"] == "op":
        return head + (f"Move {top['name']} to the GPU (create its inputs with device='cuda'), vectorize per-sample "
                       "work into batched tensor ops, or move it into DataLoader workers (num_workers>0) so it "
                       "runs beside the GPU.")
    if top["kind"] == "python":
        return head + ("Python does the work: run `perfkit hotspots TRACE` for the functions, batch per-sample "
                       "Python loops into tensor ops, move logging and bookkeeping out of the step, or run it in "
                       "DataLoader workers / a background thread.")
    if stacks:  # the Python frames are there: the time is under frames that span the loop, with nothing inside
        return head + ("The time is in host code the profiler did not record, inside Python frames that span the "
                       "loop (C extensions, I/O, sleeps, environment steps): run `perfkit hotspots TRACE` or py-spy "
                       "on the script to see which, then batch or move that work off the step.")
    return head + ("The time is in host code the profiler did not record: record with with_stack=True (or run "
                   "`perfkit profile`) to see the Python functions, then batch or move that work off the step.")
