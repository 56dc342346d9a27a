"""The verdict rules of ``perfkit.analysis.step.rules``, called directly on small evidence: one row on each
side of every threshold the module documents. No trace, no ../shared: a changed threshold or comparison
fails here within seconds."""
from __future__ import annotations

import numpy as np
import pytest

from perfkit.analysis.step import rules

T = {"compile_share": rules.COMPILE_SHARE, "gpu_bound_busy": rules.GPU_BOUND_BUSY, "input_share": rules.INPUT_SHARE,
     "host_ahead_share": rules.HOST_AHEAD_SHARE, "sync_share": rules.SYNC_SHARE}
WALL = 10_000.0  # us: shares below are of this one-step window


def row(**shares) -> dict:
    """A one-step row: each ``<layer>=share`` becomes ``<layer>_us``; launches, kernels and the queue
    delay are given as themselves (``launches``, ``median_kernel_us``, ``queue_delay_us``)."""
    out = {"wall_us": WALL, "steps": 1, "launches": shares.pop("launches", 0), "tiny_kernel_pct": 0.0,
           "median_kernel_us": shares.pop("median_kernel_us", 5.0), "queue_delay_us": shares.pop("queue_delay_us", 10.0)}
    out.update({f"{k}_us": v * WALL for k, v in shares.items()})
    return out


def decide(**shares) -> str:
    return rules.decide(row(**shares), T)[0]


# -- sync: eligible from SYNC_SHARE blocked, weighed by what removing the syncs could save ----------------
@pytest.mark.parametrize("sync, verdict", [
    (0.10, "sync-bound"),          # at the threshold (inclusive)
    (0.099, "host-compute-bound"),  # just under: the host's own work (5%) is all that is left
])
def test_sync_share_threshold(sync, verdict):
    assert decide(gpu_busy=0.3, sync=sync, host_compute_idle=0.05) == verdict


@pytest.mark.parametrize("sync_idle, verdict", [
    (0.10, "sync-bound"),   # the queue is deep, but the GPU idles at the syncs for 10% of the step
    (0.099, "host-compute-bound"),  # under it: the syncs wait on a queue the GPU works through anyway
])
def test_a_deep_queue_rules_syncs_out_unless_they_drain_the_gpu(sync_idle, verdict):
    deep = rules.HOST_AHEAD_SHARE * WALL  # median launch-to-kernel delay at the host-ahead share
    # the host's own work explains over half the GPU's idle 40%, so this is not "GPU-bound (host ahead)"
    assert decide(gpu_busy=0.6, sync=0.3, sync_idle=sync_idle, host_compute_idle=0.12, python_idle=0.09,
                  queue_delay_us=deep) == verdict


@pytest.mark.parametrize("busy, own, verdict", [
    (0.60, 0.29, "sync-bound"),          # blocked 30% of which the GPU idles 40%: the syncs can save 30%
    (0.60, 0.31, "host-compute-bound"),  # the host's own work while the GPU idles outweighs them
    (0.75, 0.24, "sync-bound"),          # the GPU idles 25%: removing the syncs saves at most that
    (0.75, 0.26, "host-compute-bound"),  # ... which 26% of host work beats
])
def test_sync_cost_is_the_blocked_time_capped_by_the_gpus_idle_share(busy, own, verdict):
    assert decide(gpu_busy=busy, sync=0.30, host_compute_idle=own) == verdict


def test_sync_cost_table():
    e = {"sync_share": 0.34, "gpu_busy_share": 0.42}
    assert rules.sync_cost(e) == pytest.approx(0.34)
    assert rules.sync_cost({"sync_share": 0.34, "gpu_busy_share": 0.70}) == pytest.approx(0.30)
    assert rules.sync_cost({"sync_share": 0.34, "gpu_busy_share": None}) == pytest.approx(0.34)  # CPU-only


# -- warm-up: from WARMUP_SHARE of the window, and the verdict behind it ----------------------------------
@pytest.mark.parametrize("warm, verdict", [
    (0.50, "warm-up"),            # at the threshold: the window measures start-up more than the loop
    (0.49, "launch-bound"),       # under it: the rest of the window decides
])
def test_warmup_share_threshold(warm, verdict):
    # shares are of the window less its warm-up: the rest is a launch-bound loop
    r = row(gpu_busy=0.2, launch_side_idle=0.5, host_compute_idle=0.1, launches=40)
    r["warmup_us"] = warm * WALL
    r = {k: (v * (1 - warm) if k.endswith("_us") and k not in ("wall_us", "warmup_us", "queue_delay_us",
                                                               "median_kernel_us") else v) for k, v in r.items()}
    got, evidence = rules.decide(r, T)
    assert got == verdict
    if verdict == "warm-up":
        assert evidence["behind_warmup"] == "launch-bound"


# -- communication: exposed collectives against the host causes, before the host-ahead rule ---------------
@pytest.mark.parametrize("comm, verdict", [
    (0.10, "communication-bound"),      # at COMM_STEP_SHARE and above every host cause
    (0.099, "GPU-bound (host ahead)"),  # under it: the queue is deep and the host explains little idle time
])
def test_exposed_collectives_come_before_a_deep_queue(comm, verdict):
    deep = rules.HOST_AHEAD_SHARE * WALL
    assert decide(gpu_busy=0.5, comm_exposed=comm, launch_side_idle=0.05, launches=40,
                  queue_delay_us=deep) == verdict


@pytest.mark.parametrize("on_comm, verdict", [
    (0.60, "communication-bound"),  # the host's 74% blocked is mostly waiting on the collective: not a host cause
    (0.50, "sync-bound"),           # 24% blocked on other work: a host cause larger than the exposed 20%
])
def test_blocking_on_a_collective_is_communication(on_comm, verdict):
    assert decide(gpu_busy=0.66, comm_exposed=0.20, sync=0.74, sync_comm=on_comm, launch_side_idle=0.02,
                  launches=40) == verdict


# -- every threshold of ``decide``'s docstring, one row on each side ---------------------------------------
# Literal numbers, never ``rules.X`` times something: a row built from the constant would move with it.
# The window is one 10 ms step unless ``steps`` says more; shares are of it.
def _row(steps: int = 1, **shares) -> dict:
    r = row(**shares)
    r["steps"] = steps
    return r


@pytest.mark.parametrize("shares, kind, verdict", [
    pytest.param(dict(compile=0.10, gpu_busy=0.05), "gpu", "compiling", id="compile_share-at"),
    pytest.param(dict(compile=0.099, gpu_busy=0.05), "gpu", "host-compute-bound", id="compile_share-under"),
    pytest.param(dict(compile=0.30, gpu_busy=0.29), "gpu", "compiling", id="compile-larger-than-every-cause"),
    pytest.param(dict(compile=0.30, gpu_busy=0.30), "gpu", "host-compute-bound", id="compile-tied-with-a-cause"),
    pytest.param(dict(gpu_busy=0.80), "gpu", "GPU-bound", id="gpu_bound_busy-at"),
    pytest.param(dict(gpu_busy=0.799), "gpu", "host-compute-bound", id="gpu_bound_busy-under"),
    pytest.param(dict(gpu_busy=0.90, comm_exposed=0.45), "gpu", "communication-bound", id="COMM_SHARE-at"),
    pytest.param(dict(gpu_busy=0.90, comm_exposed=0.449), "gpu", "GPU-bound", id="COMM_SHARE-under"),
    pytest.param(dict(gpu_busy=0.30, dataloader_idle=0.10), "gpu", "input-bound", id="input_share-at"),
    pytest.param(dict(gpu_busy=0.30, dataloader_idle=0.099), "gpu", "host-compute-bound", id="input_share-under"),
    pytest.param(dict(gpu_busy=0.30, dataloader_idle=0.20, host_compute_idle=0.21), "gpu", "host-compute-bound",
                 id="input-not-the-largest-host-cause"),
    pytest.param(dict(gpu_busy=0.0, dataloader_idle=0.05, host_compute_idle=0.5), "cpu", "CPU-only trace",
                 id="cpu-only"),
    pytest.param(dict(gpu_busy=0.50, comm_exposed=0.10), "gpu", "communication-bound", id="COMM_STEP_SHARE-at"),
    pytest.param(dict(gpu_busy=0.50, comm_exposed=0.099), "gpu", "host-compute-bound", id="COMM_STEP_SHARE-under"),
    pytest.param(dict(gpu_busy=0.50, comm_exposed=0.20, host_compute_idle=0.20), "gpu", "communication-bound",
                 id="comm-tied-with-the-largest-host-cause"),
    pytest.param(dict(gpu_busy=0.50, comm_exposed=0.20, host_compute_idle=0.21), "gpu", "host-compute-bound",
                 id="comm-under-a-host-cause"),
    pytest.param(dict(gpu_busy=0.50, queue_delay_us=1000.0), "gpu", "GPU-bound (host ahead)",
                 id="host_ahead_share-at"),
    pytest.param(dict(gpu_busy=0.50, queue_delay_us=999.0), "gpu", "host-compute-bound", id="host_ahead_share-under"),
    # 20 steps of 500 us: the delay is 20% of a step either way, so only the absolute floor decides
    pytest.param(dict(steps=20, gpu_busy=0.50, queue_delay_us=100.0), "gpu", "GPU-bound (host ahead)",
                 id="HOST_AHEAD_MIN_US-at"),
    pytest.param(dict(steps=20, gpu_busy=0.50, queue_delay_us=99.0), "gpu", "host-compute-bound",
                 id="HOST_AHEAD_MIN_US-under"),
    pytest.param(dict(gpu_busy=0.50, queue_delay_us=1000.0, host_compute_idle=0.25), "gpu", "host-compute-bound",
                 id="host-ahead-but-the-host-explains-half-the-idle-time"),
    pytest.param(dict(gpu_busy=0.30, sync=0.10), "gpu", "sync-bound", id="sync_share-at"),
    pytest.param(dict(gpu_busy=0.30, sync=0.099), "gpu", "host-compute-bound", id="sync_share-under"),
    pytest.param(dict(gpu_busy=0.30, launch_side_idle=0.5, host_compute_idle=0.1, launches=10), "gpu",
                 "launch-bound", id="LAUNCH_MIN_PER_STEP-at"),
    pytest.param(dict(gpu_busy=0.30, launch_side_idle=0.5, host_compute_idle=0.1, launches=9), "gpu",
                 "host-compute-bound", id="LAUNCH_MIN_PER_STEP-under"),
    pytest.param(dict(gpu_busy=0.30, launch_side_idle=0.30, host_compute_idle=0.30, launches=40), "gpu",
                 "launch-bound", id="launch-issuing-tied-with-own-work"),
    pytest.param(dict(gpu_busy=0.30, launch_side_idle=0.30, host_compute_idle=0.31, launches=40), "gpu",
                 "host-compute-bound", id="launch-issuing-under-own-work"),
])
def test_decide_on_each_side_of_every_threshold(shares, kind, verdict):
    assert rules.decide(_row(**shares), T, kind)[0] == verdict


@pytest.mark.parametrize("kind, verdict", [
    pytest.param("unrecorded", "GPU activity not recorded", id="unrecorded-before-every-rule"),
    pytest.param("gpu", "GPU-bound", id="recorded"),
])
def test_an_unrecorded_gpu_decides_before_any_share(kind, verdict):
    assert rules.decide(_row(gpu_busy=0.9), T, kind)[0] == verdict


@pytest.mark.parametrize("evidence, bound", [
    pytest.param({"launches_per_step": 10, "issuing_idle_share": 0.2, "own_work_idle_share": 0.2}, True,
                 id="launches-at-and-tied"),
    pytest.param({"launches_per_step": 9.9, "issuing_idle_share": 0.2, "own_work_idle_share": 0.1}, False,
                 id="launches-under"),
    pytest.param({"launches_per_step": 40, "issuing_idle_share": 0.2, "own_work_idle_share": 0.21}, False,
                 id="issuing-under-own-work"),
])
def test_launch_bound_table(evidence, bound):
    assert rules.launch_bound(evidence) is bound


# -- no_fix_verdict: what bounds a step no replayed fix saves 5% of ------------------------------------
@pytest.mark.parametrize("shares, verdict", [
    (dict(gpu_busy=0.6, comm_exposed=0.1, host_compute_idle=0.3), "GPU-bound"),           # compute 50% is largest
    (dict(gpu_busy=0.6, comm_exposed=0.35, host_compute_idle=0.2), "communication-bound"),  # exposed 35% > 25%
    (dict(gpu_busy=0.3, comm_exposed=0.0, host_compute_idle=0.31), "host-compute-bound"),
    (dict(gpu_busy=0.3, comm_exposed=0.0, host_compute_idle=0.29), "GPU-bound"),
    (dict(gpu_busy=0.3, sync=0.6, sync_idle=0.6), "GPU-bound"),  # the syncs' removal saved nothing: not a cause
    (dict(gpu_busy=0.0), "host-compute-bound"),                  # nothing measured: the untraced host
    (dict(gpu_busy=0.01, untraced=0.98), "host-compute-bound"),   # untraced 98% with the GPU idle 99%: the host's
    (dict(gpu_busy=0.40, untraced=0.41), "host-compute-bound"),   # untraced while the GPU idles: 41% > compute 40%
    (dict(gpu_busy=0.60, untraced=0.41), "GPU-bound"),            # only 40% idle to be the host's: compute 60%
    (dict(gpu_busy=0.40, untraced=0.39), "GPU-bound"),
    (dict(gpu_busy=0.44, comm_exposed=0.27, untraced=0.36), "communication-bound"),  # HTA's sampled rank 0
    (dict(gpu_busy=0.15, comm_exposed=0.10, untraced=0.50), "communication-bound"),  # a measured cause of 10%
    (dict(gpu_busy=0.15, comm_exposed=0.09, untraced=0.50), "host-compute-bound"),   # outweighs unknown time
    (dict(gpu_busy=0.20, host_compute_idle=0.10, untraced=0.50), "GPU-bound"),
    (dict(gpu_busy=0.20, host_compute_idle=0.09, untraced=0.50), "host-compute-bound"),
])
def test_no_fix_verdict_names_the_largest_part_no_fix_removes(shares, verdict):
    e = rules.decide(row(**shares), T)[1]
    assert rules.no_fix_verdict(e, T)[0] == verdict


@pytest.mark.parametrize("busy, untraced, verdict, rule", [
    (0.60, 0.70, "GPU-bound", "GPU-bound (60% of the step)"),  # untraced 70%, but only 40% of it with the GPU idle
    (0.30, 0.90, "host-compute-bound", "host-compute-bound (70% of the step)"),  # counted as far as the GPU idles
])
def test_no_fix_verdict_counts_untraced_time_only_as_far_as_the_gpu_idles(busy, untraced, verdict, rule):
    e = rules.decide(row(gpu_busy=busy, untraced=untraced), T)[1]
    assert rules.no_fix_verdict(e, T) == (verdict, f"no fix saves 5% of the step: what no fix removes, {rule}, is "
                                                   "largest")


@pytest.mark.parametrize("own, verdict", [(0.29, "GPU-bound (host ahead)"), (0.31, "GPU-bound")])
def test_no_fix_verdict_is_host_ahead_where_the_host_explains_under_half_the_idle_time(own, verdict):
    deep = rules.HOST_AHEAD_SHARE * WALL
    e = rules.decide(row(gpu_busy=0.4, host_compute_idle=own, queue_delay_us=deep), T)[1]
    assert rules.no_fix_verdict(e, T)[0] == verdict  # half of the 60% idle is 30%; else compute 40% is largest


# -- the rule each verdict states, and the evidence it keeps --------------------------------------------
def full(**shares) -> dict:
    """``row`` with no GPU busy time unless given."""
    return row(**{"gpu_busy": 0.0, **shares})


@pytest.mark.parametrize("kind, shares, verdict, rule", [
    ("unrecorded", dict(gpu_busy=0.9), "GPU activity not recorded",
     "kernel launches or GPU-only ops but no GPU events: the profiler did not record the GPU"),
    ("nohost", dict(gpu_busy=0.9), "host activity not recorded",
     "GPU events but no host event: the profiler did not record the host"),
    ("gpu", dict(compile=0.5), "compiling", "compile spans >= 10% of step and more than any other cause"),
    ("gpu", dict(gpu_busy=0.9, comm_exposed=0.5), "communication-bound",
     "gpu busy >= 80% of step, of which collectives not overlapped by compute >= 50%"),
    ("gpu", dict(gpu_busy=0.9), "GPU-bound", "gpu busy >= 80% of step"),
    ("gpu", dict(gpu_busy=0.3, dataloader_idle=0.3), "input-bound",
     "DataLoader >= 10% of step and the largest host cause"),
    ("cpu", dict(host_compute_idle=0.5), "CPU-only trace",
     "no GPU events and no kernel launches: all step time is host time"),
    ("gpu", dict(gpu_busy=0.5, comm_exposed=0.3), "communication-bound",
     "collectives not overlapped by compute >= 10% of step and larger than every host cause (a collective waits "
     "for its slowest peer; a host blocked on one waits with it)"),
    ("gpu", dict(gpu_busy=0.5, queue_delay_us=5000.0), "GPU-bound (host ahead)",
     "median launch-to-kernel delay >= 10% of step and >= 100 us: GPU work is queued"),
    ("gpu", dict(gpu_busy=0.3, sync=0.3), "sync-bound", "host blocked in syncs >= 10% of step and the largest host cause"),
    ("gpu", dict(gpu_busy=0.3, launch_side_idle=0.5, launches=40), "launch-bound",
     ">= 10 launches per step, the host issuing work (launching ops, the Python around them) >= its own work while "
     "the GPU idles, the largest host cause"),
    ("gpu", dict(gpu_busy=0.3, host_compute_idle=0.5), "host-compute-bound",
     "GPU idle while the host computes (ops that launch nothing, Python, untraced code): the largest host cause"),
])
def test_each_verdict_states_its_rule_beside_the_evidence(kind, shares, verdict, rule):
    got, evidence = rules.decide(full(**shares), T, kind)
    assert (got, evidence["rule"]) == (verdict, rule)
    assert evidence["launches"] == shares.get("launches", 0) and evidence["threshold_sync_share"] == 0.10


def test_the_warm_up_verdict_states_its_rule():
    r = full(gpu_busy=0.1)
    r["warmup_us"] = 0.6 * WALL
    verdict, evidence = rules.decide(r, T)
    assert (verdict, evidence["rule"]) == ("warm-up", "warm-up >= 50% of the window")
    assert evidence["warmup_share"] == pytest.approx(0.6) and evidence["gpu_busy_share"] == pytest.approx(0.25)


def test_a_window_that_is_all_warm_up_has_no_verdict_behind_it():
    r = full(gpu_busy=0.5)
    r["warmup_us"] = WALL  # nothing is left once the warm-up is out: every share of the rest is NaN
    verdict, evidence = rules.decide(r, T)
    assert (verdict, evidence["behind_warmup"]) == ("warm-up", None)
    assert evidence["warmup_share"] == 1.0 and np.isnan(evidence["dataloader_share"])


def test_a_cpu_window_is_warm_up_with_the_cpu_verdict_behind_it():
    r = full(host_compute_idle=0.3)
    r["warmup_us"] = 0.5 * WALL
    assert rules.decide(r, T, "cpu")[1]["behind_warmup"] == "CPU-only trace"


@pytest.mark.parametrize("wall, warm", [(0.0, 0.0), (0.5, 0.0), (WALL, WALL), (WALL, WALL - 0.5)])
def test_an_empty_window_has_nan_shares_and_no_division_error(wall, warm):
    r = full(gpu_busy=0.0, host_compute_idle=0.0)
    r.update(wall_us=wall, warmup_us=warm, gpu_busy_us=0.0)
    e = rules.decide(r, T)[1]
    if wall - warm > 0:  # half a microsecond is a window; only nothing is empty
        assert e["gpu_busy_share"] == 0.0 and e["host_compute_idle_share"] == 0.0
    else:
        assert np.isnan(e["gpu_busy_share"]) and np.isnan(e["host_compute_idle_share"])


def test_an_empty_window_reads_host_compute_bound_with_nothing_measured():
    r = full()
    r.update(wall_us=0.0, gpu_busy_us=0.0)
    verdict, e = rules.decide(r, T)
    assert verdict == "host-compute-bound" and np.isnan(e["warmup_share"]) and np.isnan(e["gpu_busy_share"])
    assert rules.host_causes(e, T)["host-compute-bound"] == 0.0  # NaN own work counts as none


def test_evidence_shares_are_of_the_window_less_its_warm_up():
    r = full(gpu_busy=0.5, comm_exposed=0.2, launch_side=0.1, host_compute=0.15, python=0.05, untraced=0.02,
            launch_side_idle=0.04, python_launch_idle=0.03, untraced_launch_idle=0.02, host_compute_idle=0.06,
            python_idle=0.05, launches=30, median_kernel_us=7.0)
    r.update(steps=3, warmup_us=0.2 * WALL, gpu_busy_warmup_us=0.1 * WALL, comm_exposed_warmup_us=0.04 * WALL,
             tiny_kernel_pct=12.0)
    e = rules.decide(r, T)[1]
    rest = 0.8  # of the window
    assert e["gpu_busy_share"] == pytest.approx(0.4 / rest)
    assert e["comm_exposed_share"] == pytest.approx(0.16 / rest)
    assert e["launch_side_share"] == pytest.approx(0.1 / rest) and e["host_compute_share"] == pytest.approx(0.15 / rest)
    assert e["python_share"] == pytest.approx(0.05 / rest) and e["untraced_share"] == pytest.approx(0.02 / rest)
    assert e["issuing_idle_share"] == pytest.approx(0.09 / rest)  # launching + Python around launches + untraced
    assert e["own_work_idle_share"] == pytest.approx(0.08 / rest)  # ops + Python less the Python around launches
    assert e["launches"] == 30 and e["launches_per_step"] == 10.0
    assert e["median_kernel_us"] == 7.0 and e["tiny_kernel_pct"] == 12.0
    assert e["queue_delay_us"] == 10.0 and e["queue_delay_share"] == pytest.approx(10.0 / (rest * WALL / 3))


def test_evidence_without_optional_columns():
    r = {"wall_us": WALL, "launches": 4, "tiny_kernel_pct": 0.0, "queue_delay_us": 10.0, "gpu_busy_us": 0.0}
    e = rules.decide(r, T)[1]
    assert e["launches_per_step"] == 4 and np.isnan(e["median_kernel_us"]) and e["warmup_share"] == 0.0
    r["steps"] = 0  # no step: the window is one
    assert rules.decide(r, T)[1]["launches_per_step"] == 4


def test_the_median_queue_delay_is_preferred_to_the_plain_one():
    r = full(gpu_busy=0.5)
    r["median_queue_delay_us"] = 2000.0
    e = rules.decide(r, T)[1]
    assert e["queue_delay_us"] == 2000.0 and e["queue_delay_share"] == pytest.approx(0.2)


def test_a_cpu_trace_has_no_gpu_shares():
    e = rules.decide(full(host_compute_idle=0.5), T, "cpu")[1]
    assert e["gpu_busy_share"] is None and e["queue_delay_share"] is None


def test_compile_beats_other_causes_that_are_not_measured():
    # causes recorded as NaN (not measured) are left out of "more than any other cause"
    r = full(compile=0.5)
    r.update(dataloader_us=float("nan"), sync_us=float("nan"), host_other_us=float("nan"))
    assert rules.decide(r, T, "cpu")[0] == "compiling"


@pytest.mark.parametrize("own, verdict", [(0.2, "input-bound"), (0.21, "CPU-only trace")])
def test_input_bound_comes_before_the_cpu_only_verdict_ties_included(own, verdict):
    assert decide_kind("cpu", dataloader_idle=0.2, host_compute_idle=own) == verdict


def decide_kind(kind, **shares) -> str:
    return rules.decide(full(**shares), T, kind)[0]


@pytest.mark.parametrize("issuing, verdict", [(0.15, "host-compute-bound"), (0.0, "GPU-bound (host ahead)")])
def test_the_host_ahead_rule_counts_issuing_work_as_explained_idle_time(issuing, verdict):
    # idle 50%, half of it 25%: DataLoader 5% + issuing 15% + own work 10% = 30% explains enough
    assert decide(gpu_busy=0.5, dataloader_idle=0.05, launch_side_idle=issuing, host_compute_idle=0.1,
                  queue_delay_us=5000.0) == verdict


@pytest.mark.parametrize("part", ["dataloader_idle", "launch_side_idle", "host_compute_idle"])
def test_no_fix_verdict_counts_every_part_of_the_hosts_measured_work(part):
    e = rules.decide(full(gpu_busy=0.2, **{part: 0.3}), T)[1]
    assert rules.no_fix_verdict(e, T)[0] == "host-compute-bound"  # 30% of host work beats 20% of GPU compute


@pytest.mark.parametrize("host, verdict", [(0.25, "GPU-bound"), (0.249, "GPU-bound (host ahead)")])
def test_no_fix_host_ahead_needs_the_host_under_half_the_idle_time(host, verdict):
    e = rules.decide(full(gpu_busy=0.5, host_compute_idle=host, queue_delay_us=5000.0), T)[1]
    assert rules.no_fix_verdict(e, T)[0] == verdict


def test_no_fix_verdict_texts():
    deep = rules.decide(full(gpu_busy=0.5, queue_delay_us=5000.0), T)[1]
    assert rules.no_fix_verdict(deep, T) == (
        "GPU-bound (host ahead)", "no fix saves 5% of the step, and its kernels queue far behind their launch while "
                                  "the GPU idles: it waits for something other than the host")
    e = rules.decide(full(gpu_busy=0.6, comm_exposed=0.1, host_compute_idle=0.3), T)[1]
    assert rules.no_fix_verdict(e, T) == (
        "GPU-bound", "no fix saves 5% of the step: what no fix removes, GPU-bound (50% of the step), is largest")
