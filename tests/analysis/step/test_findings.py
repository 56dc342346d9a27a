"""The verdict's text (``perfkit.analysis.step.findings``) reads its thresholds from the evidence, never its own;
the findings below the verdict fire on each side of their thresholds (``rules``), on numbers built in the test."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.step import findings as sf
from perfkit.analysis.step import rules
from perfkit.analysis.step.findings import _title


def _evidence(busy: float, sync: float, gpu_bound_busy: float, sync_share: float) -> dict:
    return {"comm_exposed_share": 0.4, "gpu_busy_share": busy, "sync_share": sync,
            "threshold_gpu_bound_busy": gpu_bound_busy, "threshold_sync_share": sync_share}


_OVERALL = {"steps": 1, "comm_exposed_us": 4000.0, "comm_exposed_warmup_us": 0.0, "wall_us": 10_000.0,
            "warmup_us": 0.0, "gpu_busy_pct": 85.0}


@pytest.mark.parametrize("gpu_bound_busy, sync_share, mentions", [
    (0.90, 0.10, True),    # busy 85% is under a raised GPU-bound line: the host's waits are named
    (0.80, 0.10, False),   # over the default line: the GPU is busy, nothing to say of waits
    (0.90, 0.25, False),   # the waits (20%) under a raised sync line
])
def test_the_communication_title_follows_the_thresholds_in_force(gpu_bound_busy, sync_share, mentions):
    title = _title("communication-bound", _evidence(0.85, 0.20, gpu_bound_busy, sync_share), _OVERALL, {})
    assert ("host blocked in syncs 20%" in title) == mentions


def test_exposed_collectives_are_quoted_on_the_shares_time_base():
    overall = dict(_OVERALL, comm_exposed_us=6_000.0, comm_exposed_warmup_us=2_000.0, warmup_us=5_000.0)
    title = _title("communication-bound", _evidence(0.85, 0.0, 0.8, 0.1), overall, {})
    assert "take 4.00 ms of 5.00 ms" in title  # not 6 ms of 5 ms (120%)


# -- the finding thresholds (``rules``' second block), one row on each side of each --------------------------
_T = {"compile_share": rules.COMPILE_SHARE, "gpu_bound_busy": rules.GPU_BOUND_BUSY, "input_share": rules.INPUT_SHARE,
      "host_ahead_share": rules.HOST_AHEAD_SHARE, "sync_share": rules.SYNC_SHARE}
_WALL = 10_000.0  # us, one step


def _gpu_bound_result(**overall) -> tuple[dict, dict]:
    """A GPU-bound one-step result (fields and overall numbers) with nothing below the verdict, and ``overall``
    changed."""
    evidence = rules.decide({"wall_us": _WALL, "gpu_busy_us": 9_000.0, "launches": 40, "tiny_kernel_pct": 0.0,
                             "queue_delay_us": 10.0}, _T)[1]
    o = {"wall_us": _WALL, "gpu_busy_us": 9_000.0, "host_busy_us": 5_000.0, "compile_us": 0.0, "warmup_us": 0.0,
         "median_queue_delay_us": 10.0, "steps": 1, "gpu_busy_pct": 90.0, "kernels": 50, "tiny_kernels": 0,
         "tiny_kernel_pct": 0.0, "launches_per_step": 40.0, "mean_launch_us": 5.0, "dataloader_us": 0.0, **overall}
    r = {"verdict": "GPU-bound", "evidence": evidence, "compile": None, "has_gpu": True, "tiny_kernel_us": 10.0,
         "steps": pd.DataFrame({"compile_us": [o["compile_us"]]}),
         "ops": pd.DataFrame({"name": ["aten::copy_"], "cat": ["cpu_op"], "count": [3]})}
    return r, o


@pytest.mark.parametrize("overall, copy_us, title", [
    pytest.param({}, 0.0, None, id="nothing-below-the-verdict"),
    pytest.param({"kernels": 101, "tiny_kernels": 51}, 0.0, "of 101 kernels run under", id="TINY_KERNEL-both-above"),
    pytest.param({"kernels": 101, "tiny_kernels": 50}, 0.0, None, id="TINY_KERNEL_SHARE-at-half"),
    pytest.param({"kernels": 100, "tiny_kernels": 100}, 0.0, None, id="TINY_KERNEL_MIN_COUNT-at-100"),
    pytest.param({"dataloader_us": 501.0}, 0.0, "DataLoader takes", id="DATALOADER_NOTE_SHARE-above"),
    pytest.param({"dataloader_us": 500.0}, 0.0, None, id="DATALOADER_NOTE_SHARE-at"),
    pytest.param({}, 500.0, "copy/convert ops take", id="COPY_OPS_SHARE-at"),
    pytest.param({}, 499.0, None, id="COPY_OPS_SHARE-under"),
    pytest.param({"compile_us": 100.0}, 0.0, "torch.compile compiled", id="COMPILE_NOTE_SHARE-at"),
    pytest.param({"compile_us": 99.0}, 0.0, None, id="COMPILE_NOTE_SHARE-under"),
])
def test_findings_below_the_verdict(overall, copy_us, title):
    r, o = _gpu_bound_result(**overall)
    below = [f.title for f in sf.findings(r, o, copy_us)[1:]]
    assert len(below) == (0 if title is None else 1) and all(title in t for t in below)


@pytest.mark.parametrize("compile_us, severity", [
    pytest.param(1_000.0, "medium", id="COMPILE_SHARE-at"),
    pytest.param(999.0, "low", id="COMPILE_SHARE-under"),
])
def test_compile_finding_severity(compile_us, severity):
    r, o = _gpu_bound_result(compile_us=compile_us)
    assert [f.severity for f in sf._compile_finding("GPU-bound", o, r["steps"])] == [severity]


@pytest.mark.parametrize("gpu_busy_us, severity", [
    pytest.param(5_000.0, "medium", id="LOW_UTILIZATION-at"),
    pytest.param(4_999.0, "high", id="LOW_UTILIZATION-under"),
])
def test_verdict_severity_from_gpu_utilization(gpu_busy_us, severity):
    assert sf._severity("sync-bound", {"gpu_busy_share": gpu_busy_us / _WALL},
                        {"gpu_busy_us": gpu_busy_us, "wall_us": _WALL}) == severity


@pytest.mark.parametrize("copy_busy_us, bound", [
    pytest.param(5_000.0, True, id="COPY_BOUND_SHARE-at"),
    pytest.param(4_999.0, False, id="COPY_BOUND_SHARE-under"),
])
def test_a_gpu_busy_with_copies_gets_the_copy_fix(copy_busy_us, bound):
    assert sf.copy_bound(pd.DataFrame({"gpu_busy_us": [10_000.0], "copy_busy_us": [copy_busy_us]})) is bound


@pytest.mark.parametrize("sync_share, mentioned", [
    pytest.param(0.01, True, id="MENTION_SHARE-at"),
    pytest.param(0.0099, False, id="MENTION_SHARE-under"),
])
def test_host_ahead_fix_mentions_blocked_time_from_one_percent(sync_share, mentioned):
    e = {"sync_share": sync_share, "queue_delay_us": 2_000.0}
    fix = sf._fix("GPU-bound (host ahead)", e, {"gpu_busy_pct": 60.0}, {}, 0)
    assert ("host time blocked in syncs" in fix) is mentioned


@pytest.mark.parametrize("dataloader_share, mentioned", [
    pytest.param(0.05, True, id="DATALOADER_NOTE_SHARE-at"),
    pytest.param(0.049, False, id="DATALOADER_NOTE_SHARE-under"),
])
def test_cpu_only_fix_names_the_dataloader_from_five_percent(dataloader_share, mentioned):
    ops = pd.DataFrame({"name": ["aten::add"], "cat": ["cpu_op"], "self_pct": [50.0]})
    annotations = pd.DataFrame({"name": [], "total_us": [], "count": []})
    fix = sf._cpu_only_fix({"dataloader_share": dataloader_share}, ops, annotations)
    assert ("The DataLoader takes" in fix) is mentioned


def test_the_verdict_findings_evidence_leaves_out_the_shares_that_are_zero():
    """The findings table's evidence cell lists what there is, not every rule's 0 % share; the
    result's own evidence keeps them all."""
    r, o = _gpu_bound_result()
    finding = sf.verdict_finding(r["verdict"], r["evidence"], o, r)
    zero = [k for k, v in r["evidence"].items() if v == 0 and not k.startswith("threshold_")]
    assert zero and not set(zero) & set(finding.evidence)
    assert finding.evidence["gpu_busy_share"] == r["evidence"]["gpu_busy_share"] > 0


def test_what_decided_the_verdict_is_its_threshold_text_not_its_evidence():
    r, o = _gpu_bound_result()
    evidence = dict(r["evidence"], rule="amp saves most: 40% of the median step (>= 5%)", decided_by="replay",
                    share_verdict="GPU-bound")
    finding = sf.verdict_finding(r["verdict"], evidence, o, r)
    assert not {"rule", "decided_by", "share_verdict"} & set(finding.evidence)
    assert finding.threshold.startswith("amp saves most: 40% of the median step (>= 5%)")
