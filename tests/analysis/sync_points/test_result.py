"""The sync points' result (``perfkit.analysis.sync_points.result``) on entries built in the test: sites grouped and
ranked, the totals in and outside the steps, each site's finding one row each side of HIGH_SHARE and MEDIUM_SHARE,
the text every surface shows. No trace, no ../shared."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.sync_points import result as sr
from perfkit.analysis.sync_points.result import SITE_COLUMNS, SyncResult, site_table, sync_findings, where

_ROW = {"kind": "item", "name": "aten::item", "op": "aten::item", "top_op": "aten::item", "rank": 0, "step": 0,
        "ts_us": 0.0, "blocked_us": 100.0, "gpu_confirmed": True, "call": "cudaStreamSynchronize", "frame": "f",
        "file": "train.py", "line": 42, "func": "step", "inner_frame": None, "inner_file": None, "inner_line": None,
        "inner_func": None, "running_line": False, "torch_internal": False, "in_steps": True}


def events(*changes) -> pd.DataFrame:
    """One entry per ``changes`` dict, each ``_ROW`` with those fields changed."""
    return pd.DataFrame([{**_ROW, **c} for c in changes])


def result(frame, *, n_steps=2, wall_us=10_000.0, cpu_only=False, warnings=()):
    return SyncResult(events=frame, gpu_side=pd.DataFrame({"name": ["Stream Sync"]}), n_steps=n_steps,
                      wall_us=wall_us, findings=sync_findings(frame, n_steps, wall_us, cpu_only), warnings=warnings,
                      cpu_only=cpu_only)


# -- sites ---------------------------------------------------------------------------------------------------------
def test_entries_group_into_sites_the_users_own_first_each_by_blocked_time():
    table = site_table(events(
        {"blocked_us": 100.0, "step": 0}, {"blocked_us": 50.0, "step": 1},                # one site, two steps
        {"line": 7, "blocked_us": 400.0, "torch_internal": True, "file": "torch/x.py"},  # torch's: after the user's
        {"line": 9, "blocked_us": 150.0, "in_steps": False, "gpu_confirmed": False},       # outside the steps
        *({"line": 11, "blocked_us": 50.0, "step": 0} for _ in range(3))), n_steps=2)
    assert list(table.columns) == SITE_COLUMNS
    assert table[["line", "count", "blocked_us", "per_step", "steps_seen", "gpu_confirmed", "torch_internal"]].to_dict(
        "records") == [
        {"line": 11, "count": 3, "blocked_us": 150.0, "per_step": 1.5, "steps_seen": 1, "gpu_confirmed": 3,
         "torch_internal": False},   # ties with line 42 on time: more entries first
        {"line": 42, "count": 2, "blocked_us": 150.0, "per_step": 1.0, "steps_seen": 2, "gpu_confirmed": 2,
         "torch_internal": False},
        {"line": 9, "count": 1, "blocked_us": 150.0, "per_step": 0.0, "steps_seen": 1, "gpu_confirmed": 0,
         "torch_internal": False},
        {"line": 7, "count": 1, "blocked_us": 400.0, "per_step": 0.5, "steps_seen": 1, "gpu_confirmed": 1,
         "torch_internal": True}]


def test_a_site_without_python_frames_has_blank_file_and_line_and_keeps_its_first_names():
    table = site_table(events({"file": None, "line": None, "func": None, "top_op": "aten::index", "call": "c1"},
                              {"file": None, "line": None, "func": None, "top_op": "aten::other", "call": "c2"}), 1)
    row = table.iloc[0]
    assert (row["file"], row["line"], row["func"], row["inner_file"], row["inner_line"], row["inner_func"]) == (
        "", -1, "", "", -1, "")
    assert (row["top_op"], row["call"], row["count"]) == ("aten::index", "c1", 2)


def test_running_line_holds_only_when_every_entry_of_the_site_says_so():
    both = site_table(events({"running_line": True}, {"running_line": True}), 1)["running_line"].tolist()
    one = site_table(events({"running_line": True}, {"running_line": False}), 1)["running_line"].tolist()
    assert (both, one) == ([True], [False])


def test_entries_without_the_optional_columns_count_as_inside_the_steps_and_the_users_own():
    frame = events({}).drop(columns=["in_steps", "running_line", "torch_internal"])
    table = site_table(frame, 1)
    assert table[["per_step", "running_line", "torch_internal"]].to_dict("records") == [
        {"per_step": 1.0, "running_line": False, "torch_internal": False}]


def test_an_empty_site_table_has_typed_columns():
    table = site_table(events({}).iloc[:0], 1)
    assert table.empty and list(table.columns) == SITE_COLUMNS
    assert table["line"].dtype == np.int64 and table["blocked_us"].dtype == np.float64
    assert table["running_line"].dtype == bool and table["kind"].dtype == object


# -- totals, by kind, the headline -------------------------------------------------------------------------------
def frame_in_and_out():
    return events({"blocked_us": 300.0}, {"kind": "stream_sync", "blocked_us": 500.0, "op": "aten::copy_"},
                  {"blocked_us": 2_000.0, "in_steps": False, "name": "cudaDeviceSynchronize", "kind": "device_sync"},
                  {"blocked_us": 40.0, "gpu_confirmed": False}, {"blocked_us": 20.0, "gpu_confirmed": False})


def test_the_total_counts_sync_points_in_and_outside_the_steps_and_the_reads_apart():
    r = result(frame_in_and_out())
    assert r.total == {"count": 3, "blocked_us": 2_800.0, "per_step": 1.0, "gpu_confirmed": 3,
                       "in_steps": {"count": 2, "blocked_us": 800.0}, "outside_steps": {"count": 1, "blocked_us": 2_000.0},
                       "steps": 2, "wall_us": 10_000.0, "host_scalar_reads": 2, "host_scalar_read_us": 60.0,
                       "cpu_only": False}
    assert r.host_reads["blocked_us"].tolist() == [40.0, 20.0]


def test_on_a_cpu_only_trace_every_entry_is_a_possible_sync_point():
    r = result(frame_in_and_out(), cpu_only=True)
    assert len(r.sync_points) == 5 and r.host_reads.empty
    assert r.headline() == ("5 possible sync points (CPU-only trace) (2 per step), 2.860 ms blocked (1 of them, 2.000 "
                            "ms, outside the profiled steps: not in the per-step figures)")


def test_by_kind_is_most_blocked_first_with_entries_per_step():
    """``per_step`` counts the entries inside the steps, as the site table and the total do: the device sync
    outside them is 1 in ``count`` and 0 per step in every table (it read 0.5 in this one, 0 in the next)."""
    r = result(frame_in_and_out())
    assert r.by_kind.to_dict("records") == [
        {"kind": "device_sync", "count": 1, "blocked_us": 2_000.0, "per_step": 0.0},
        {"kind": "stream_sync", "count": 1, "blocked_us": 500.0, "per_step": 0.5},
        {"kind": "item", "count": 1, "blocked_us": 300.0, "per_step": 0.5}]
    sites = r.to_frame().groupby("kind")["per_step"].sum()
    assert {k["kind"]: k["per_step"] for k in r.by_kind.to_dict("records")} == sites.to_dict()


def test_the_headline_says_the_points_the_time_outside_the_steps_and_the_reads():
    r = result(frame_in_and_out())
    reads = ("2 host scalar reads, no GPU wait (0.060 ms host time; .item()/nonzero on CPU tensors: not sync points)")
    assert sr.reads_line(r.total) == reads
    assert r.headline() == ("3 sync points (1 per step), 2.800 ms blocked (1 of them, 2.000 ms, outside the profiled "
                            f"steps: not in the per-step figures); {reads}")
    assert result(events({})).headline() == "1 sync points (0.5 per step), 0.100 ms blocked"
    assert repr(result(events({}), warnings=("w",))) == (
        "<SyncResult 1 sync points (0.5 per step), 0.100 ms blocked; 1 sites, 1 warnings>")


def test_the_html_shows_the_reads_only_when_there_are_some():
    with_reads, without = result(frame_in_and_out())._repr_html_(), result(events({}))._repr_html_()
    assert "Host-device syncs" in with_reads and "over 2 steps" in with_reads and sr.SOURCE_NOTE[:40] in with_reads
    assert "host scalar reads, no GPU wait" in with_reads and "host scalar reads" not in without


def test_the_json_holds_sites_reads_and_findings():
    j = result(frame_in_and_out()).to_json()
    assert j["total"]["count"] == 3 and j["source_lines"] == sr.SOURCE_NOTE and j["warnings"] == []
    assert j["by_kind"]["device_sync"] == {"count": 1, "blocked_us": 2_000.0, "per_step": 0.0}  # outside the steps
    assert j["host_scalar_reads"]["count"] == 2 and j["host_scalar_reads"]["host_us"] == 60.0
    assert j["host_scalar_reads"]["per_step"] == 1.0 and j["host_scalar_reads"]["sites"][0]["host_us"] == 60.0
    assert j["gpu_side"] == [{"name": "Stream Sync"}]
    assert [f["severity"] for f in j["findings"]] == ["medium", "medium", "info"]  # the reads are not findings
    site = j["sites"][0]
    assert site == {"kind": "device_sync", "op": "aten::item", "file": "train.py", "line": 42, "func": "step",
                    "inner_file": None, "inner_line": None, "inner_func": None, "call": "cudaStreamSynchronize",
                    "count": 1, "blocked_us": 2_000.0, "per_step": 0.0, "gpu_confirmed": 1, "top_op": "aten::item",
                    "running_line": False, "torch_internal": False}


def test_a_site_without_a_source_line_writes_nulls():
    site = sr._site_json({**site_table(events({"file": None, "line": None, "func": None}), 1).iloc[0]})
    assert (site["file"], site["line"], site["func"]) == (None, None, None)
    assert sr._site_json({**site_table(events({"inner_file": "x.py", "inner_line": 3}), 1).iloc[0]})["inner_line"] == 3


# -- findings: HIGH_SHARE, MEDIUM_SHARE, possible sync points, the note for what lies outside the steps -----------
@pytest.mark.parametrize("blocked_us, severity", [
    pytest.param(1_000.0, "high", id="HIGH_SHARE-at"), pytest.param(999.0, "medium", id="HIGH_SHARE-under"),
    pytest.param(200.0, "medium", id="MEDIUM_SHARE-at"), pytest.param(199.0, "low", id="MEDIUM_SHARE-under"),
])
def test_a_sites_severity_follows_its_share_of_step_time(blocked_us, severity):
    (f,) = sync_findings(events({"blocked_us": blocked_us}), 2, 10_000.0)
    assert f.severity == severity
    assert f.threshold == "'high' from 10%, 'medium' from 2% of step wall time blocked (perfkit rule)"
    assert f.evidence == {"count": 1, "per_step": 0.5, "blocked_us": blocked_us,
                          "share_of_step_time": blocked_us / 10_000.0, "op": "aten::item", "top_op": "aten::item"}


def test_a_site_finding_word_for_word():
    (f,) = sync_findings(events({"kind": "stream_sync", "op": "aten::copy_", "top_op": "aten::to"}), 2, 0.0)
    assert f.title == "stream_sync at function starting at train.py:42 (step): 1x, 0.100 ms blocked"
    assert f.severity == "low" and f.evidence["share_of_step_time"] == 0.0  # no wall time: no share
    assert f.fix == sr.FIXES["stream_sync"].format(op="aten::copy_")
    (g,) = sync_findings(events({"kind": "memcpy_sync", "op": "", "call": "cudaMemcpy"}), 2, 1_000.0)
    assert g.fix.startswith("cudaMemcpy is a synchronous copy") and "an op" not in g.fix
    (h,) = sync_findings(events({"kind": "stream_sync", "op": ""}), 2, 1_000.0)
    assert h.fix.startswith("A stream synchronize inside an op:")


@pytest.mark.parametrize("cpu_only", [False, True])
def test_a_scalar_read_no_wait_confirmed_is_a_finding_only_on_a_cpu_only_trace(cpu_only):
    found = sync_findings(events({"gpu_confirmed": False, "blocked_us": 5_000.0}), 2, 10_000.0, cpu_only)
    if not cpu_only:
        assert found == ()
        return
    (f,) = found
    assert f.severity == "low" and f.title == ("possible item at function starting at train.py:42 (step): 1x, 5.000 ms "
                                               "host time")
    assert f.fix == f"{sr.CONFIRM} If it waits: {sr.FIXES['item']}"
    assert f.threshold == "'low': a CPU-only trace cannot show a GPU wait (perfkit rule)"


def test_an_unconfirmed_wait_that_is_not_a_scalar_read_is_still_a_finding():
    (f,) = sync_findings(events({"kind": "stream_sync", "gpu_confirmed": False, "blocked_us": 5_000.0}), 2, 10_000.0)
    assert f.severity == "high" and not f.title.startswith("possible")


def test_at_most_five_sites_get_a_finding_and_what_lies_outside_the_steps_is_one_note():
    frame = events(*({"line": i, "blocked_us": 100.0 * (i + 1)} for i in range(7)),
                   {"in_steps": False, "blocked_us": 300.0, "name": "cudaDeviceSynchronize"},
                   {"in_steps": False, "blocked_us": 1_200.0, "name": "cudaStreamSynchronize"})
    found = sync_findings(frame, 2, 10_000.0)
    assert len(found) == 1 + sr.MAX_SITE_FINDINGS
    note = found[-1]  # "info" ranks after every severity
    assert note.severity == "info" and note.title == ("2 sync point(s) outside the profiled steps, 1.500 ms blocked "
                                                     "(longest: cudaStreamSynchronize, 1.200 ms)")
    assert note.evidence == {"count": 2, "blocked_us": 1_500.0}
    assert note.fix.startswith("Nothing to change in the training step")
    assert note.threshold == "entries whose step is not a full profiled step (perfkit rule)"
    assert [f.evidence["blocked_us"] for f in found[:5]] == [700.0, 600.0, 500.0, 400.0, 300.0]


# -- where a site is ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("site, text", [
    ({"file": "train.py", "line": 42, "func": "step"}, "function starting at train.py:42 (step)"),
    ({"file": "train.py", "line": 42, "func": "step", "running_line": True},
     "function running at train.py:42 when the profiler started (step)"),
    ({"file": "train.py", "line": 42, "func": "step", "inner_file": "torch/x.py", "inner_line": 7, "inner_func": "f"},
     "function starting at train.py:42 (step), via torch/x.py:7 (f)"),
    ({"file": "", "top_op": "aten::index", "op": "aten::copy_", "call": "c"}, "aten::index (via aten::copy_)"),
    ({"file": "", "top_op": "aten::item", "op": "aten::item", "call": "c"}, "aten::item"),
    ({"file": "", "top_op": "", "op": "aten::item", "call": "c"}, "aten::item"),
    ({"file": "", "top_op": "aten::item", "op": "", "call": "c"}, "aten::item"),
    ({"file": "", "top_op": "", "op": "", "call": "cudaMemcpy"}, "cudaMemcpy"),
    ({"file": "", "top_op": "", "op": "", "call": ""}, "?"),
])
def test_where_a_site_is(site, text):
    assert where(site) == text


def test_a_site_json_keeps_line_zero_and_the_flags():
    row = {**site_table(events({"line": 0, "inner_file": "x.py", "inner_line": 0, "running_line": True,
                                "torch_internal": True}), 1).iloc[0]}
    site = sr._site_json(row)
    assert (site["line"], site["inner_line"], site["running_line"], site["torch_internal"]) == (0, 0, True, True)
    bare = sr._site_json({k: v for k, v in row.items() if k not in ("running_line", "torch_internal")})
    assert (bare["running_line"], bare["torch_internal"]) == (False, False)


def test_blank_lines_become_minus_one_and_blank_names_empty():
    assert sr._blank(pd.Series([3.0, None]), -1).tolist() == [3, -1]
    assert sr._blank(pd.Series(["a", None]), "").tolist() == ["a", ""]


def test_a_scalar_read_no_wait_confirmed_is_no_finding_unless_the_trace_is_said_to_be_cpu_only():
    assert sync_findings(events({"gpu_confirmed": False}), 2, 10_000.0) == ()


def test_a_window_under_a_microsecond_still_gives_a_share():
    (f,) = sync_findings(events({"blocked_us": 0.25}), 1, 0.5)
    assert f.evidence["share_of_step_time"] == 0.5 and f.severity == "high"


def test_the_html_shows_the_gpu_side_and_the_warnings():
    html = result(frame_in_and_out(), warnings=("a warning here",))._repr_html_()
    assert "Stream Sync" in html and "a warning here" in html and "<h5>2 host scalar reads" in html
