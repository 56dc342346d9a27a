"""CUDA-only code paths, exercised on CPU with fakes for what a GPU would provide.

Each fake records the order of calls (synchronize, clock reads, copies, mode switches) so the
tests check perfkit's own logic: synchronize before every clock read, state restored on errors,
syncs counted once per call at the user's line, units. What needs a real GPU (kernels actually
queued, pinned memory really page-locked, the exact syncs torch reports) is not covered here.
"""
import dataclasses
import inspect
import os
import threading
import warnings

import pytest
import torch

from perfkit.detect import runtime as rt
from perfkit.detect import syncdebug
from perfkit.detect.runtime import SyncEvent, detect_syncs

# What torch 2.13 emits: c10 warn_or_error_on_sync's TORCH_WARN text plus the source location
# torch's PyWarningHandler appends to non-verbatim C++ warnings.
TORCH_SYNC_WARNING = ("called a synchronizing CUDA operation (Triggered internally at "
                      "/pytorch/c10/cuda/CUDAFunctions.cpp:185.)")


def here() -> int:
    """Line number of the caller."""
    return inspect.currentframe().f_back.f_lineno


# --- sync debug mode (perfkit.detect.runtime / syncdebug) --------------------------------------

class FakeSyncDebug:
    """torch.cuda.{get,set}_sync_debug_mode with a current mode; ``fail_on`` makes one set raise."""

    def __init__(self, mode=0, fail_on=None):
        self.mode, self.fail_on, self.calls = mode, fail_on, []

    def get(self):
        self.calls.append(("get",))
        return self.mode

    def set(self, mode):
        assert mode in ("warn", 0, 1, 2), mode
        self.calls.append(("set", mode))
        if mode == self.fail_on:
            raise RuntimeError("CUDA error: fake failure")
        self.mode = mode


@pytest.fixture
def sync_debug(monkeypatch):
    fake = FakeSyncDebug()
    monkeypatch.setattr(rt, "_sync_debug_api", lambda: (fake.get, fake.set))
    yield fake
    assert syncdebug._ACTIVE["users"] == 0


_FAKE_OPS = '''
import warnings
from torch.overrides import handle_torch_function, has_torch_function_unary


def fake_sync_op(t, syncs=1):
    """Like a CUDA op: a torch function that reports ``syncs`` syncs with stacklevel 1 of the
    C++ caller, i.e. at the Python frame that called it (stacklevel=2 from here)."""
    if has_torch_function_unary(t):
        return handle_torch_function(fake_sync_op, (t,), t, syncs=syncs)
    for _ in range(syncs):
        warnings.warn(MESSAGE, UserWarning, stacklevel=2)
    return t


def fake_known_op(t, syncs=1):
    if has_torch_function_unary(t):
        return handle_torch_function(fake_known_op, (t,), t, syncs=syncs)
    for _ in range(syncs):
        warnings.warn(MESSAGE, UserWarning, stacklevel=2)
    return t
'''


@pytest.fixture(scope="module")
def ops():
    """Fake ops compiled as if they lived inside torch, so the detector treats them as library
    code and looks further up the stack for the user's line."""
    ns = {"MESSAGE": TORCH_SYNC_WARNING, "__name__": "torch._perfkit_fake_ops"}
    exec(compile(_FAKE_OPS, os.path.join(os.path.dirname(torch.__file__), "_perfkit_fake_ops.py"), "exec"), ns)
    return ns


@pytest.fixture
def known_op(ops, monkeypatch):
    table = dict(rt.sync_classifiers())
    table[ops["fake_known_op"]] = lambda args, kwargs: ("item", None, False)
    monkeypatch.setattr(rt, "sync_classifiers", lambda: table)
    return ops["fake_known_op"]


def test_sync_in_a_loop_counts_every_iteration_at_the_user_line(sync_debug, ops):
    """torch warns at the frame that called the op, which under the mode is perfkit's dispatch:
    the same location each time, so without the "always" filter only the first would show."""
    t = torch.ones(2)
    with detect_syncs(treat_cpu_as_device=False) as det:
        for _ in range(5):
            line = here() + 1
            ops["fake_sync_op"](t)
    assert det.report.events == (SyncEvent(__file__, line, "sync-debug:fake_sync_op", 5),)
    assert det.report.sync_debug is True
    assert sync_debug.calls == [("get",), ("set", "warn"), ("set", 0)]


def test_a_call_that_syncs_several_times_counts_once(sync_debug, ops, known_op):
    t = torch.ones(2)
    with detect_syncs(treat_cpu_as_device=False) as det:
        for _ in range(2):
            unknown_line = here() + 1
            ops["fake_sync_op"](t, syncs=3)
            known_line = here() + 1
            known_op(t, syncs=3)  # the op table counts it; its warnings are not counted again
    assert sorted(det.report.to_records(), key=lambda r: r["line"]) == [
        {"file": __file__, "line": unknown_line, "op": "sync-debug:fake_sync_op", "count": 2},
        {"file": __file__, "line": known_line, "op": "item", "count": 2}]


def test_user_mode_filters_and_hook_are_restored_when_the_block_raises(monkeypatch):
    fake = FakeSyncDebug(mode=2)  # the user had asked for errors on sync
    monkeypatch.setattr(rt, "_sync_debug_api", lambda: (fake.get, fake.set))
    filters, show = list(warnings.filters), warnings.showwarning
    with pytest.raises(ValueError, match="bad batch"):
        with detect_syncs(treat_cpu_as_device=False):
            raise ValueError("bad batch")
    assert fake.calls == [("get",), ("set", "warn"), ("set", 2)] and fake.mode == 2
    assert warnings.filters == filters and warnings.showwarning is show
    assert torch._C._len_torch_function_stack() == 0


def test_failing_to_switch_the_mode_leaves_nothing_changed(monkeypatch, ops):
    fake = FakeSyncDebug(mode=0, fail_on="warn")
    monkeypatch.setattr(rt, "_sync_debug_api", lambda: (fake.get, fake.set))
    filters, show = list(warnings.filters), warnings.showwarning
    with pytest.raises(RuntimeError, match="fake failure"):
        with detect_syncs(treat_cpu_as_device=False):
            pass
    assert fake.calls == [("get",), ("set", "warn"), ("set", 0)]
    assert warnings.filters == filters and warnings.showwarning is show
    assert syncdebug._ACTIVE["users"] == 0 and torch._C._len_torch_function_stack() == 0
    fake.fail_on = None  # the next detector starts from scratch
    with detect_syncs(treat_cpu_as_device=False) as det:
        ops["fake_sync_op"](torch.ones(1))
    assert det.report.total == 1 and fake.mode == 0


def test_nested_detectors_switch_the_mode_once(sync_debug, ops):
    t = torch.ones(2)
    outer, inner = detect_syncs(treat_cpu_as_device=False), detect_syncs(treat_cpu_as_device=False)
    with outer:
        with inner:
            ops["fake_sync_op"](t)
        assert sync_debug.mode == "warn"  # the inner exit must not restore while outer runs
        ops["fake_sync_op"](t)
    assert sync_debug.calls == [("get",), ("set", "warn"), ("set", 0)]
    assert (outer.report.total, inner.report.total) == (2, 1)


def test_overlapping_detectors_in_two_threads_restore_the_mode_at_the_end(sync_debug, ops):
    """The mode is process-wide: thread B joining after A must not save A's "warn" as the
    mode to restore, and A leaving first must not switch it off under B."""
    entered, leave, seen = threading.Event(), threading.Event(), {}

    def thread_b():
        with detect_syncs(treat_cpu_as_device=False) as det:
            entered.set()
            leave.wait(10)
            seen["mode_while_b_runs"] = sync_debug.mode
            ops["fake_sync_op"](torch.ones(1))
        seen["b"] = det.report.total

    show = warnings.showwarning
    with detect_syncs(treat_cpu_as_device=False) as det_a:
        worker = threading.Thread(target=thread_b)
        worker.start()
        assert entered.wait(10)
    leave.set()
    worker.join(10)
    assert seen == {"mode_while_b_runs": "warn", "b": 1} and det_a.report.total == 0
    assert sync_debug.calls == [("get",), ("set", "warn"), ("set", 0)] and sync_debug.mode == 0
    assert warnings.showwarning is show


@pytest.mark.parametrize("user_mode, shown", [(0, 0), (1, 1)])
def test_a_sync_in_a_thread_without_detector_is_not_counted_here(monkeypatch, ops, user_mode, shown):
    fake = FakeSyncDebug(mode=user_mode)
    monkeypatch.setattr(rt, "_sync_debug_api", lambda: (fake.get, fake.set))
    forwarded = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest: forwarded.append(str(message)))
    with detect_syncs(treat_cpu_as_device=False) as det:
        worker = threading.Thread(target=ops["fake_sync_op"], args=(torch.ones(1),))
        worker.start()
        worker.join(10)
    assert det.report.total == 0
    # shown only when the user had asked for sync warnings themselves
    assert forwarded == [TORCH_SYNC_WARNING] * shown


# --- a fake GPU for the timing paths --------------------------------------------------------------

class FakeGPU:
    """What perfkit asks torch.cuda for, with one log of synchronize calls, clock reads and
    the timed work, in call order. ``clock()`` returns ``now``. Work advances it at once, or,
    queued (``queued=True``, like a non-blocking copy), only at the next synchronize."""

    def __init__(self, count=2):
        self.count, self.log, self.now, self.queued = count, [], 0.0, 0.0

    def synchronize(self, device=None):
        self.log.append(("sync", str(device)))
        self.now, self.queued = self.now + self.queued, 0.0

    def clock(self):
        self.log.append(("clock",))
        return self.now

    def work(self, seconds=1e-3, what=("fn",), queued=False):
        self.log.append(what)
        if queued:
            self.queued += seconds
        else:
            self.now += seconds


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGPU()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: fake.count)
    monkeypatch.setattr(torch.cuda, "synchronize", fake.synchronize)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"Fake GPU ({device})")
    return fake


def synced_regions(log, device, work=("fn",)) -> tuple[int, int]:
    """Check that every clock read comes right after a synchronize of ``device`` and that clock
    reads pair up into timed regions. Returns (regions, pieces of work run outside them)."""
    inside, regions, outside = False, 0, 0
    for i, entry in enumerate(log):
        if entry == ("clock",):
            assert i > 0 and log[i - 1] == ("sync", device), f"clock read {i} not synchronized: {log[i - 3:i + 1]}"
            inside, regions = not inside, regions + (not inside)
        elif entry[0] in work:
            outside += not inside
    assert not inside
    return regions, outside


def test_resolve_device_checks_the_cuda_index(gpu):
    from perfkit.device import resolve_device
    from perfkit.errors import ParameterError

    assert [resolve_device(d) for d in ("auto", "cuda", "cuda:1", "cpu")] == ["cuda", "cuda", "cuda:1", "cpu"]
    for bad in ("cuda:2", "cuda:-1", "cuda:x", "cuda:", "auto:1"):
        with pytest.raises(ParameterError, match="2 visible|use one of"):
            resolve_device(bad)


def test_time_call_synchronizes_the_device_before_each_clock_read(gpu):
    from perfkit.bench.timing import time_call

    seconds = time_call(lambda: gpu.work(2e-3), device="cuda:1", clock=gpu.clock, inner=3)
    assert gpu.log == [("sync", "cuda:1"), ("clock",), ("fn",), ("fn",), ("fn",), ("sync", "cuda:1"), ("clock",)]
    assert seconds == pytest.approx(2e-3)  # per call: the region over inner


def test_time_callable_times_only_synchronized_regions(gpu):
    from perfkit.bench.timing import time_callable

    r = time_callable(lambda: gpu.work(1e-3), repeats=4, warmup=2, inner=2, device="cuda", clock=gpu.clock)
    assert synced_regions(gpu.log, "cuda") == (6, 0) and r.device == "cuda"
    assert r.samples == pytest.approx((1e-3,) * 4)


def test_compare_synchronizes_around_every_timed_call_of_both_sides(gpu):
    from perfkit.bench.compare import compare

    r = compare(lambda: gpu.work(1e-3, ("a",)), lambda: gpu.work(2e-3, ("b",)), repeats=6, warmup=1,
                device="cuda:1", clock=gpu.clock, min_samples=3)
    assert synced_regions(gpu.log, "cuda:1", work=("a", "b")) == (14, 0)  # (1 warm-up + 6) x 2
    assert r.median_a == pytest.approx(1e-3) and r.median_b == pytest.approx(2e-3)
    assert r.environment["gpu"] == "Fake GPU (cuda:1)"


@dataclasses.dataclass(frozen=True)
class EmptyConfig:
    """A config for a test workload (Workload.run records asdict(config))."""


def test_workload_run_times_each_step_between_synchronizes(gpu):
    from perfkit.workloads.base import Workload

    class Tiny(Workload):
        name = "tiny"

        def _step(self):
            gpu.work(5e-3)
            return {}

    run = Tiny(EmptyConfig(), device="cuda:1").run(3, clock=gpu.clock)
    assert synced_regions(gpu.log, "cuda:1") == (3, 0)
    assert run.step_s == pytest.approx((5e-3,) * 3) and run.device == "cuda:1"


# --- htod_sweep ---------------------------------------------------------------------------------

def test_htod_sweep_on_a_fake_gpu_times_queued_copies_and_reports_gb_per_s(gpu, monkeypatch):
    """Copies run at 10 GB/s; a non-blocking copy from pinned memory only finishes at the next
    synchronize, so forgetting the synchronize before the end clock would show it as free."""
    from perfkit.bench.htod import MODES, htod_sweep

    hosts, dsts = [], []

    class Host:
        def __init__(self, size, dtype=None, pin_memory=False):
            self.size, self.pinned = size, pin_memory
            hosts.append(self)

    class Dst:
        def __init__(self, size, dtype=None, device=None):
            self.device = device
            dsts.append(self)

        def copy_(self, src, non_blocking=False):
            gpu.work(src.size / 10e9, ("copy", src.pinned, non_blocking), queued=non_blocking and src.pinned)
            return self

    monkeypatch.setattr(torch, "ones", Host)
    monkeypatch.setattr(torch, "empty", Dst)
    r = htod_sweep(sizes_bytes=(4096, 2**20), repeats=3, device="cuda:1", host_baseline=False, clock=gpu.clock)
    frame = r.to_frame()
    assert r.available and r.device == "cuda:1" and {d.device for d in dsts} == {"cuda:1"}
    assert frame["gbps"].tolist() == pytest.approx([10.0] * 6)
    assert frame["median_s"].tolist() == pytest.approx([4096 / 10e9] * 3 + [2**20 / 10e9] * 3)
    assert [(h.size, h.pinned) for h in hosts] == [(s, m != "pageable") for s in (4096, 2**20) for m in MODES]
    copies = {entry[1:] for entry in gpu.log if entry[0] == "copy"}
    assert copies == {(False, False), (True, False), (True, True)}  # non_blocking only from pinned
    # one warm-up copy per cell outside the timed regions, then 3 synchronized samples per cell
    assert synced_regions(gpu.log, "cuda:1", work=("copy",)) == (18, 6)


# --- amp_ab ---------------------------------------------------------------------------------------

@pytest.fixture
def amp():
    from perfkit.bench import amp_ab

    return amp_ab


def test_amp_sync_count_counts_torch_sync_warnings_per_step_and_restores_the_mode(gpu, monkeypatch, amp):
    fake = FakeSyncDebug(mode=2)  # the user had "error" set
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", fake.get)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", fake.set)

    class Runner:
        def step(self, batch):
            assert fake.mode == "warn"
            for _ in range(2):  # e.g. found_inf.item() for two devices: the same line twice
                warnings.warn(TORCH_SYNC_WARNING, UserWarning)
            warnings.warn("call torch.cuda.synchronize() before reading a timer", UserWarning)

    assert amp._syncs_per_step(Runner(), batch=None) == 2.0  # not the unrelated warning, not deduplicated
    assert fake.calls == [("get",), ("set", "warn"), ("set", 2)]

    class Failing:
        def step(self, batch):
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        amp._syncs_per_step(Failing(), batch=None)
    assert fake.mode == 2


def test_amp_peak_memory_is_reset_and_measured_from_the_arms_start(gpu, monkeypatch, amp):
    log, mem = [], {"allocated": 1000, "peak": 10**9}  # a high peak left over from earlier work

    def reset_peak(device=None):
        log.append(("reset_peak", device))
        mem["peak"] = mem["allocated"]

    def allocate(nbytes):
        mem["allocated"] += nbytes
        mem["peak"] = max(mem["peak"], mem["allocated"])

    class FakeArm:
        def __init__(self, cfg, autocast):
            log.append(("build", autocast))
            allocate(400)  # weights and optimizer state

        def step(self, batch):
            log.append(("step",))
            allocate(300)  # activations, freed at the end of the step
            allocate(-300)
            return torch.tensor(2.0)

    monkeypatch.setattr(amp, "_Arm", FakeArm)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append(("empty_cache",)))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset_peak)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: log.append(("allocated", device))
                        or mem["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: log.append(("max", device))
                        or mem["peak"])
    cfg = amp._Config(None, lambda step: ((float(step),), 0.0), None, "cuda:1", torch.float16, True, "adam",
                      None, 1e-3, 0)
    _, losses, peak, method = amp._train_curve(cfg, "amp", steps=2)
    assert (losses, peak, method) == ([2.0, 2.0], 700, "cuda max_memory_allocated")
    assert log == [("empty_cache",), ("reset_peak", "cuda:1"), ("allocated", "cuda:1"), ("build", True),
                   ("step",), ("step",), ("max", "cuda:1")]


class ModelOnFakeDevice(torch.nn.Linear):
    """A CPU model that records the device it is moved to."""

    def __init__(self):
        super().__init__(3, 1)
        self.moved_to = None

    def to(self, device):
        self.moved_to = device
        return self


def test_amp_float16_arm_uses_cuda_autocast_and_the_grad_scaler_in_order(monkeypatch, amp):
    log = []

    class FakeAutocast:
        def __init__(self, device_type, dtype=None, enabled=True):
            log.append(("autocast", device_type, dtype, enabled))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class FakeScaler:
        def __init__(self, device="cuda"):
            log.append(("GradScaler", device))

        def scale(self, loss):
            log.append(("scale",))
            return loss * 1.0

        def step(self, opt):
            log.append(("scaler.step",))
            opt.step()

        def update(self):
            log.append(("update",))

    monkeypatch.setattr(torch, "autocast", FakeAutocast)
    monkeypatch.setattr(torch.amp, "GradScaler", FakeScaler)
    dtype, scaler, notes = amp._resolve_dtype("float16", "cuda:1")
    assert (dtype, scaler, notes) == (torch.float16, True, [])
    cfg = amp._Config(ModelOnFakeDevice, None, torch.nn.functional.mse_loss, "cuda:1", dtype, scaler, "sgd",
                      None, 0.1, 0)
    batch = ((torch.ones(4, 3),), torch.zeros(4, 1))
    arm = amp._Arm(cfg, autocast=True)
    before = arm.model.weight.detach().clone()
    arm.step(batch)
    assert arm.model.moved_to == "cuda:1" and not torch.equal(before, arm.model.weight)
    assert log == [("GradScaler", "cuda"), ("autocast", "cuda", torch.float16, True), ("scale",),
                   ("scaler.step",), ("update",)]
    log.clear()
    amp._Arm(cfg, autocast=False).step(batch)  # the fp32 arm: no scaler, autocast switched off
    assert log == [("autocast", "cuda", torch.float16, False)]


# --- hunt_leak -----------------------------------------------------------------------------------

def test_hunt_leak_reads_cuda_memory_after_synchronizing_and_finds_the_leak(gpu, monkeypatch):
    from perfkit.bench.leak import hunt_leak

    state, reads = {"allocated": 0, "queued": False}, []

    def step():  # keeps a 512 B block per step, like a leaked scalar CUDA tensor
        state["allocated"] += 512
        state["queued"] = True

    def synchronize(device=None):
        state["queued"] = False
        gpu.synchronize(device)

    def reader(name, value):
        return lambda device=None: reads.append((name, str(device), state["queued"])) or value()

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(torch.cuda, "memory_allocated", reader("allocated", lambda: state["allocated"]))
    monkeypatch.setattr(torch.cuda, "memory_reserved", reader("reserved", lambda: 2 * 2**20))
    r = hunt_leak(step, steps=40, warmup=5, sample_every=10, device="cuda:1", track_objects=False)
    frame = r.to_frame()
    assert reads and all(device == "cuda:1" and not queued for _, device, queued in reads)
    assert frame["cuda_allocated_bytes"].tolist() == [512 * (5 + s) for s in (0, 10, 20, 30, 40)]
    assert (frame["cuda_reserved_bytes"] == 2 * 2**20).all()
    assert (r.verdict, r.decided_by) == ("leak", "cuda_allocated_bytes")
    assert r.per_1000 == pytest.approx(512 * 1000)


# --- replay workload: the pinned staging buffer ---------------------------------------------------

@pytest.mark.parametrize("normalize_on", ["device", "host"])
def test_replay_waits_for_the_last_copy_before_refilling_pinned_staging(monkeypatch, normalize_on):
    """On CUDA the non-blocking copy out of the pinned staging buffer may still be running when
    the next step gathers into it. Emulated on CPU: the workload is told its staging is pinned,
    CUDA events are fakes, and every write into staging is checked against the last copy's event."""
    from perfkit.workloads import replay

    log = []

    class FakeEvent:
        def __init__(self):
            self.id, self.done = len([e for e in log if e[0] == "record"]), False

        def record(self, stream):
            log.append(("record", self.id, stream))

        def synchronize(self):
            self.done = True
            log.append(("wait", self.id))

    w = replay.make(device="cpu", stack="preallocated", normalize_on=normalize_on, batch=2, seq_len=2,
                    capacity=16, frame_size=8)
    w._pin = True  # as on CUDA with pin_memory=True
    staging = {id(t) for t in w._staging.values()}
    events = []
    monkeypatch.setattr(torch.cuda, "Event", lambda: events.append(FakeEvent()) or events[-1])
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: f"stream({device})")
    index_select, copy_, to = torch.index_select, torch.Tensor.copy_, torch.Tensor.to

    def check_write(out):
        if id(out) in staging:
            log.append(("write",))
            assert all(e.done for e in events), "staging overwritten while the last copy may still read it"

    def fake_index_select(*args, out=None, **kwargs):
        check_write(out)
        return index_select(*args, out=out, **kwargs)

    def fake_copy_(self, src, non_blocking=False):
        check_write(self)
        return copy_(self, src, non_blocking)

    def fake_to(self, *args, **kwargs):
        if id(self) in staging:
            log.append(("copy", kwargs.get("non_blocking")))
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch, "index_select", fake_index_select)
    monkeypatch.setattr(torch.Tensor, "copy_", fake_copy_)
    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    for _ in range(3):
        w.step()
    steps = [e for e in log if e[0] != "write"]
    assert steps == [("copy", True), ("record", 0, "stream(cpu)"),
                     ("wait", 0), ("copy", True), ("record", 1, "stream(cpu)"),
                     ("wait", 1), ("copy", True), ("record", 2, "stream(cpu)")]
