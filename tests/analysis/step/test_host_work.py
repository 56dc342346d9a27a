"""What the host computes most and the fix each kind gets (``perfkit.analysis.step.host_work``)."""
import pandas as pd
import pytest

from perfkit.analysis.step.host_work import host_compute_fix, top_host_work

O = {"wall_us": 1_100.0, "warmup_us": 100.0, "python_us": 200.0, "untraced_us": 300.0}
E = {"launches_per_step": 12}


@pytest.mark.parametrize("op_us, kind, share", [(299.0, "untraced", 0.3), (301.0, "op", 0.301)])
def test_the_largest_of_op_python_and_untraced_leads(op_us, kind, share):
    top = top_host_work({"host_ops": pd.DataFrame({"name": ["aten::copy_"], "total_us": [op_us]})}, O)
    assert top["kind"] == kind and top["share"] == pytest.approx(share)  # the share leaves warm-up out


def test_python_leads_when_it_holds_the_most_and_no_op_was_recorded():
    top = top_host_work({}, dict(O, python_us=301.0))
    assert (top["kind"], top["what"], top["us"]) == ("python", "Python with no op under it", 301.0)


@pytest.mark.parametrize("name, says", [("aten::randn", "device='cuda'"), ("aten::empty", "expandable_segments"),
                                        ("aten::index", "Move aten::index to the GPU")])
def test_each_op_kind_gets_its_own_fix(name, says):
    fix = host_compute_fix({"kind": "op", "name": name}, E, stacks=True)
    assert says in fix and "12 launches per step" in fix


@pytest.mark.parametrize("stacks, says, never", [(True, "py-spy", "with_stack=True"), (False, "with_stack=True", "py-spy")])
def test_untraced_time_asks_for_stacks_only_when_the_trace_has_none(stacks, says, never):
    fix = host_compute_fix({"kind": "untraced", "name": "untraced host code"}, E, stacks)
    assert says in fix and never not in fix


def test_python_time_points_at_hotspots():
    assert "perfkit hotspots" in host_compute_fix({"kind": "python", "name": "Python"}, E, stacks=True)


_HEAD = ("The host computes while the GPU waits; launching is not the cost (3 launches per step), so torch.compile's "
         "CUDA graphs or fusing kernels will not shorten the step. ")


@pytest.mark.parametrize("kind, name, tail", [
    ("op", "aten::normal_", "aten::normal_ makes random numbers on the CPU: create them on the GPU (torch.randn(..., "
                            "device='cuda'), torch.rand_like on a GPU tensor) instead of on the host and copying them."),
    ("op", "aten::empty", "aten::empty is memory allocation: the caching allocator asking the driver for memory "
                          "(cudaMalloc/hipMalloc) inside the step. Allocate the buffers once outside the loop and reuse "
                          "them (out=, preallocated tensors), keep tensor sizes stable from step to step, or set "
                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to cut fragmentation-driven allocations."),
    ("op", "aten::add", "Move aten::add to the GPU (create its inputs with device='cuda'), vectorize per-sample work "
                        "into batched tensor ops, or move it into DataLoader workers (num_workers>0) so it runs beside "
                        "the GPU."),
    ("python", "aten::normal_", "Python does the work: run `perfkit hotspots TRACE` for the functions, batch per-sample "
                                "Python loops into tensor ops, move logging and bookkeeping out of the step, or run it "
                                "in DataLoader workers / a background thread."),
    ("untraced", "aten::empty", "The time is in host code the profiler did not record: record with with_stack=True (or "
                                "run `perfkit profile`) to see the Python functions, then batch or move that work off "
                                "the step."),
])
def test_host_compute_fix_follows_what_the_host_computed(kind, name, tail):
    assert host_compute_fix({"kind": kind, "name": name}, {"launches_per_step": 3.0}, stacks=False) == _HEAD + tail


@pytest.mark.parametrize("python, untraced, op_us, top", [
    (1_000.0, 500.0, 2_000.0, ("op", "aten::add", 2_000.0, 0.25, "CPU op aten::add")),
    (3_000.0, 500.0, 2_000.0, ("python", "Python", 3_000.0, 0.375, "Python with no op under it")),
    (1_000.0, 2_500.0, 2_000.0, ("untraced", "untraced host code", 2_500.0, 0.3125, "untraced host time")),
    (1_000.0, 500.0, None, ("python", "Python", 1_000.0, 0.125, "Python with no op under it")),
])
def test_top_host_work_is_the_largest_of_ops_python_and_untraced_time(python, untraced, op_us, top):
    ops = None if op_us is None else pd.DataFrame({"name": ["aten::add", "aten::mul"], "total_us": [op_us, 10.0]})
    o = {"wall_us": 10_000.0, "python_us": python, "untraced_us": untraced, "warmup_us": 2_000.0}  # shares of the 8 ms left
    got = top_host_work({"host_ops": ops}, o)
    assert (got["kind"], got["name"], got["us"], got["share"], got["what"]) == pytest.approx(top)


def test_top_host_work_in_an_empty_window_divides_by_no_zero():
    got = top_host_work({}, {"wall_us": 0.0, "warmup_us": 0.0, "python_us": 0.0, "untraced_us": 0.0})
    assert got["share"] == 0.0


def test_a_window_under_a_microsecond_is_its_own_time_base():
    got = top_host_work({}, {"wall_us": 0.5, "warmup_us": 0.0, "python_us": 0.25, "untraced_us": 0.0})
    assert got["share"] == pytest.approx(0.5)  # 0.25 us of 0.5 us, not of a 1 us floor


def test_untraced_time_inside_python_frames_points_at_hotspots_and_py_spy_word_for_word():
    fix = host_compute_fix({"kind": "untraced", "name": "untraced host code"}, {"launches_per_step": 3.0}, stacks=True)
    assert fix == _HEAD + (
        "The time is in host code the profiler did not record, inside Python frames that span the loop (C extensions, "
        "I/O, sleeps, environment steps): run `perfkit hotspots TRACE` or py-spy on the script to see which, then batch "
        "or move that work off the step.")
