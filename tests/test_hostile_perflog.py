"""Fuzz, round 2: the perf log (issue 24: formulas in text cells ran in a spreadsheet; a 100k-row
log and 3,000 trend groups failed `perfkit run`'s append/judge/index; `perfkit log --path` a FIFO
hung and /dev/zero blew up; PerfLog.append from 4 processes at once)."""
import csv
import os
import time
from multiprocessing import get_context

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import Budget, run_cli
from perfkit.report.perflog import PerfLog
from perfkit.report.perflog.store import COLUMNS, FORMAT_VERSION, write_rows
from perfkit.report.publish.index import MAX_TREND_PLOTS, build_index

FORMULA = st.text(alphabet=st.sampled_from("=+-@\t'aZ1(); "), min_size=1, max_size=10).filter(lambda t: t.strip() == t)


@settings(max_examples=40, deadline=None)
@given(subject=FORMULA, metric=FORMULA, unit=FORMULA, value=st.floats(-1e6, 1e6, allow_nan=False))
def test_text_cells_are_neutralized_and_read_back_unchanged(tmp_path_factory, subject, metric, unit, value):
    path = tmp_path_factory.mktemp("log") / "perf_log.csv"
    PerfLog(path).append(investigation="=cmd|' /C calc'!A0", subject=subject, metric=metric, unit=unit, value=value)
    with open(path, newline="") as fh:
        [row] = list(csv.DictReader(fh))
    text = [v for k, v in row.items() if k in ("investigation", "subject", "metric", "unit")]
    assert all(cell[:1] not in ("=", "+", "-", "@", "\t", "\r") for cell in text), row
    assert float(row["value"]) == value  # numbers stay numbers: -3.5 is not '-3.5
    back = PerfLog(path).read().iloc[0]
    assert (back["investigation"], back["subject"], back["metric"], back["unit"], back["value"]) == (
        "=cmd|' /C calc'!A0", subject, metric, unit, value)


def _big_log(path, rows, groups):
    """``rows`` judged rows written straight through the log's writer (judging 100k rows one by one
    is not what this test is about)."""
    template = dict.fromkeys(COLUMNS, "") | {"format_version": FORMAT_VERSION, "date": "2026-01-01", "metric": "step_ms",
                                             "unit": "ms", "verdict": "no baseline", "higher_is_better": False,
                                             "device": "cpu", "ci_low": float("nan"), "ci_high": float("nan"),
                                             "baseline": float("nan"), "delta_pct": float("nan")}
    write_rows(path, [template | {"investigation": f"inv{i % groups}", "value": 10.0 + i % 17,
                                  "run_id": f"2026-01-01/{i:06d}"} for i in range(rows)])


def test_a_100k_row_log_with_3000_trend_groups_appends_judges_and_indexes(tmp_path):
    path = tmp_path / "perf_log.csv"
    _big_log(path, 100_000, 3_000)
    start = time.monotonic()
    row = PerfLog(path).append(investigation="inv7", metric="step_ms", value=30.0, device="cpu")
    assert row["baseline"] == 10.0 + 99_007 % 17 and row["baseline_run"] == "2026-01-01/099007"
    index = build_index(tmp_path, perf_log=path)
    assert time.monotonic() - start < 90
    page = index.read_text()
    assert page.count('class="trend"') == MAX_TREND_PLOTS and f"{3_000 - MAX_TREND_PLOTS} more" in page
    assert len(PerfLog(path).read()) == 100_001


def _append_rows(path, worker, count):
    log = PerfLog(path)
    for i in range(count):
        log.append(investigation="concurrent", subject=f"p{worker}", metric=f"m{i}", value=float(worker * 1000 + i))


def test_append_from_four_processes_keeps_every_row(tmp_path):
    path = tmp_path / "perf_log.csv"
    procs = [get_context("fork").Process(target=_append_rows, args=(path, w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    frame = PerfLog(path).read()
    assert len(frame) == 800 and sorted(frame["value"]) == sorted(float(w * 1000 + i) for w in range(4) for i in range(200))


def test_log_path_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "perf_log.csv"
    os.mkfifo(fifo)
    run_cli("log", "--path", fifo, budget=Budget(wall_s=20)).assert_refused(fifo, "not a regular file")
    assert not (tmp_path / "perf_log.csv.lock").exists()


def test_log_path_dev_zero_is_refused_in_bounded_memory():
    run_cli("log", "--path", "/dev/zero", budget=Budget(wall_s=20)).assert_refused(
        "/dev/zero", "not a regular file")
    assert not os.path.exists("/dev/zero.lock")
