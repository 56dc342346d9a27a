"""Memory findings that name the real cause: one snapshot shows growth within its window, never a
leak; optimizer state created on the first step is named; allocation sites skip the unwinder and
allocator frames; a leak needs growth across several snapshots (snapshot_growth)."""
import gzip
import pickle

import pytest

from conftest import shared_memory
from perfkit import snapshot_growth
from perfkit.analysis.memory_leak.memory_snapshot import frame_site, load_memory_snapshot
from perfkit.errors import ParameterError

MIB = 2**20
UNWIND = [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
          {"filename": "??", "line": 0, "name": "torch::CapturedTraceback::gather(bool, bool, bool)"},
          {"filename": "memory_snapshot.cpp", "line": 0, "name": "torch::cuda::(anonymous namespace)::gather_with_cpp()"},
          {"filename": "CUDACachingAllocator.cpp", "line": 0,
           "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long)"},
          {"filename": "", "line": 0, "name": "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>)"},
          {"filename": "??", "line": 0, "name": "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"},
          {"filename": "??", "line": 0, "name": "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)"}]
BACKWARD = UNWIND + [
    {"filename": "??", "line": 0, "name": "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"},
    {"filename": "??", "line": 0, "name": "torch::autograd::Engine::evaluate_function(...)"},
    {"filename": "??", "line": 0, "name": "__libc_start_main"}]


def py(path, line, name):
    return {"filename": path, "line": line, "name": name}


def test_backward_allocations_are_charged_to_the_autograd_node_not_the_unwinder():
    assert frame_site(BACKWARD) == "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"


def test_without_python_or_autograd_frames_the_first_meaningful_cpp_frame_is_the_site():
    frames = UNWIND + [{"filename": "RegisterCUDA.cpp", "line": 0, "name": "at::wrapper_CUDA_mm(at::Tensor const&)"}]
    assert frame_site(frames) == "RegisterCUDA.cpp:0:at::wrapper_CUDA_mm(at::Tensor const&)"


def test_optimizer_state_is_charged_to_torch_optim_and_user_frames_still_win_elsewhere():
    adam = UNWIND + [py("/env/lib/python3.12/site-packages/torch/optim/adam.py", 139, "_init_group"),
                     py("/env/lib/python3.12/site-packages/torch/optim/optimizer.py", 485, "wrapper"),
                     py("/job/train.py", 88, "train")]
    assert frame_site(adam) == "/env/lib/python3.12/site-packages/torch/optim/adam.py:139:_init_group"
    forward = UNWIND + [py("/env/site-packages/torch/nn/modules/linear.py", 125, "forward"),
                        py("/job/model.py", 12, "forward")]
    assert frame_site(forward) == "/job/model.py:12:forward"


def _snapshot(tmp_path, name, events, allocated_blocks=()):
    """A snapshot pickle: ``events`` (action, addr, size, frames) in order; blocks still allocated."""
    trace = [{"action": a, "addr": addr, "size": size, "stream": 0, "time_us": i, "frames": fr}
             for i, (a, addr, size, fr) in enumerate(events)]
    blocks = [{"address": addr, "size": size, "requested_size": size, "state": "active_allocated", "frames": fr}
              for addr, size, fr in allocated_blocks]
    allocated = sum(b["size"] for b in blocks)
    segment = {"device": 0, "address": 0, "total_size": max(allocated, 2 * MIB), "allocated_size": allocated,
               "active_size": allocated, "requested_size": allocated, "stream": 0, "segment_type": "large",
               "blocks": blocks}
    path = tmp_path / name
    path.write_bytes(gzip.compress(pickle.dumps({"segments": [segment], "device_traces": [trace]})))
    return path


ADAM = UNWIND + [py("/env/site-packages/torch/optim/adam.py", 139, "_init_group"), py("/job/train.py", 88, "train")]
FORWARD = UNWIND + [py("/job/model.py", 12, "forward")]


def test_first_training_step_growth_is_optimizer_state_not_a_leak(tmp_path):
    """The issue's case: one snapshot of a first step; Adam creates 2 x 400 MiB of state, the
    forward's activations are freed by backward, the backward's 400 MiB of gradients stay."""
    events = [("alloc", 1, 300 * MIB, FORWARD), ("alloc", 2, 400 * MIB, BACKWARD), ("free_completed", 1, 300 * MIB, BACKWARD),
              ("alloc", 3, 400 * MIB, ADAM), ("alloc", 4, 400 * MIB, ADAM)]
    snap = load_memory_snapshot(_snapshot(tmp_path, "first_step.pickle.gz", events))
    assert snap.net_growth_bytes == 1200 * MIB
    (growth,) = [f for f in snap.findings if "grew" in f.title]
    assert growth.severity == "info" and "leak" not in growth.title
    assert growth.title == "live memory grew by 1,200.0 MiB within the recorded window, 800.0 MiB of it optimizer state"
    assert growth.evidence["optimizer_state_bytes"] == 800 * MIB and "not a leak" in growth.fix
    sites = snap.top_sites(10)["frame"].tolist()
    assert not any("unwind" in s for s in sites)
    assert "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)" in sites


def test_growth_that_is_not_optimizer_state_is_reported_as_growth_within_the_window(tmp_path):
    events = [("alloc", 1, 300 * MIB, FORWARD), ("alloc", 2, 20 * MIB, FORWARD)]
    snap = load_memory_snapshot(_snapshot(tmp_path, "fwd.pickle.gz", events))
    (growth,) = [f for f in snap.findings if "grew" in f.title]
    assert growth.severity == "low" and "not evidence of a leak" in growth.title
    assert "/job/model.py:12:forward 320.0 MiB" in growth.fix and "snapshot_growth" in growth.fix


@pytest.mark.shared
@pytest.mark.parametrize("name", ["cs336_nothanmin_memsnap_fwd_bf16autocast.pickle.gz",
                                  "cs336_nothanmin_memsnap_fwd_fp32.pickle.gz"])
def test_forward_that_keeps_its_activations_is_growth_not_a_leak(name):
    """These forwards keep every layer's activations for a backward that is not in the window:
    live memory rises linearly to ~11 GiB. A single window cannot call that a leak."""
    snap = load_memory_snapshot(shared_memory(name))
    (growth,) = [f for f in snap.findings if "grew" in f.title]
    assert growth.severity == "low" and "leak" not in growth.title.replace("not evidence of a leak", "")
    assert "cs336_systems/adapters.py:" in growth.evidence["top_site"]
    assert not any(f.severity in ("critical", "high") for f in snap.findings)


@pytest.mark.shared
@pytest.mark.parametrize("name", ["cs336_silmont_memsnap_fwd_bf16_ctx128.pickle.gz",
                                  "cs336_silmont_memsnap_fwd_fp32_ctx128.pickle.gz"])
def test_negative_controls_have_no_growth_finding(name):
    snap = load_memory_snapshot(shared_memory(name))
    assert not any("grew" in f.title or "leak" in f.title for f in snap.findings)


# --- several snapshots ---------------------------------------------------------------------------

def _series(tmp_path, sizes_mib):
    """Snapshots after successive steps: each holds blocks of the given sizes (MiB) allocated at
    the optimizer (the first) and at the user's loss list (the rest)."""
    paths = []
    for i, sizes in enumerate(sizes_mib):
        blocks = [(k, s * MIB, ADAM if k == 0 else FORWARD) for k, s in enumerate(sizes)]
        paths.append(_snapshot(tmp_path, f"s{i}.pickle.gz", [], blocks))
    return paths


def test_growth_in_every_later_interval_is_a_leak(tmp_path):
    r = snapshot_growth(_series(tmp_path, [[800], [800, 10], [800, 10, 10], [800, 10, 10, 10]]))
    assert r.verdict == "leak" and r.table["growth_bytes"].tolist() == [0, 10 * MIB, 10 * MIB, 10 * MIB]
    (f,) = r.findings
    assert f.severity == "high" and f.title.startswith("leak: allocated memory grows 10.0 MiB per interval")
    assert r.sites["frame"].tolist() == ["/job/model.py:12:forward"] and r.sites["growth_bytes"].tolist() == [20 * MIB]


def test_growth_in_the_first_interval_only_is_first_step_state(tmp_path):
    r = snapshot_growth(_series(tmp_path, [[1], [800], [800], [800]]))
    assert r.verdict == "first-step growth"
    assert r.findings[0].severity == "info" and "not a leak" in r.findings[0].title


def test_two_snapshots_cannot_tell_and_one_is_refused(tmp_path):
    paths = _series(tmp_path, [[1], [800]])
    r = snapshot_growth(paths)
    assert r.verdict == "growth between two snapshots" and "third snapshot" in r.findings[0].fix
    assert snapshot_growth(_series(tmp_path, [[800], [800], [800]])).findings == ()
    with pytest.raises(ParameterError, match="at least two snapshots"):
        snapshot_growth(paths[:1])
    assert "SnapshotGrowth" in repr(r) and "<table" in r._repr_html_()
