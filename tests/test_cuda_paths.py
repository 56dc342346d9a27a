"""CUDA-only code paths, exercised on CPU with fakes for what a GPU would provide.

Each fake records the order of calls (synchronize, clock reads, copies, mode switches) so the
tests check perfkit's own logic: synchronize before every clock read, state restored on errors,
syncs counted once per call at the user's line, units. What needs a real GPU (kernels actually
queued, pinned memory really page-locked, the exact syncs torch reports) is not covered here.
"""
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
    import inspect

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
