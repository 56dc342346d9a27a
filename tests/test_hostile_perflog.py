"""Fuzz, round 2: the perf log (issue 24: formulas in text cells ran in a spreadsheet; a 100k-row
log and 3,000 trend groups failed `perfkit run`'s append/judge/index; `perfkit log --path` a FIFO
hung and /dev/zero blew up; PerfLog.append from 4 processes at once). Round 3 (issue 38): a 1M-row log
read and appended in bounded memory, `perfkit log` showing the last runs, a UTF-8 BOM accepted."""
import csv
import json
import os
import time
from multiprocessing import get_context

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import Budget, run_cli, run_main, run_python
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


# --- issue 38 item 4: a 1M-row log is read and appended in bounded memory; a BOM is accepted ------

_ROW = ("2,2026-01-01/{run:06d},2026-01-01T00:00:00+00:00,2026-01-01,inv{inv},trace{inv},,m{m},{v}.5,ms,"
        "{v}.0,{v}.9,,,,no baseline,false,,abc1234,cpu,2.5.0,host\n")
_RUNS_PER_BLOCK, _METRICS = 50, 20  # a block of 1,000 rows: 50 runs of 20 metrics, investigations inv0..inv6


def _million_row_log(path):
    """1,000,000 rows, written as text (a thousand copies of one 1,000-row block; the last block's run
    ids are the newest): going through PerfLog would judge each row."""
    block = lambda first_run: "".join(_ROW.format(run=first_run + i // _METRICS, inv=(i // _METRICS) % 7,
                                                  m=i % _METRICS, v=10 + i % 17)
                                      for i in range(_RUNS_PER_BLOCK * _METRICS))
    old = block(0)
    with open(path, "w") as fh:
        fh.write(",".join(COLUMNS) + "\n")
        for _ in range(999):
            fh.write(old)
        fh.write(block(100_000))
    return path


_MEASURE = r"""
import json, re, sys, tracemalloc
from perfkit.report.perflog import PerfLog
log = PerfLog(sys.argv[1])
def peak_rss_mb():  # VmHWM starts afresh at exec (ru_maxrss keeps the forking pytest's, ~500 MB)
    with open("/proc/self/status") as fh:
        return int(re.search(r"VmHWM:\s+(\d+) kB", fh.read()).group(1)) / 1024
tracemalloc.start()
shown = log.read(last_runs=20)
read_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.reset_peak()
row = log.append(investigation="inv3", subject="trace3", metric="m9", unit="ms", value=30.0, device="cpu",
                 ci_low=29.0, ci_high=31.0, run_id="2026-02-01/000000")
print(json.dumps({"rows": len(shown), "warnings": shown.attrs.get("warnings", []), "read_peak": read_peak,
                  "append_peak": tracemalloc.get_traced_memory()[1], "baseline_run": row["baseline_run"],
                  "baseline": row["baseline"], "peak_rss_mb": peak_rss_mb()}))
"""


def test_a_1m_row_log_is_read_from_its_end_and_appended_in_bounded_memory(tmp_path):
    # Issue 38: `perfkit log` over this log took 2.4 GB and `perfkit run`'s append read it whole (MemoryError).
    path = _million_row_log(tmp_path / "perf_log.csv")
    size = path.stat().st_size
    out = run_python(_MEASURE, path, budget=Budget(mem_mb=2048, cpu_s=300, wall_s=600))
    assert out.rc == 0, out.why()
    got = json.loads(out.out)
    assert got["read_peak"] < 50 << 20 and got["append_peak"] < 50 << 20, got  # the old reader: ~2 GB each
    assert got["peak_rss_mb"] < 300, got  # ~180 MB, mostly the imports (pandas, scipy)
    assert got["rows"] == 20 * _METRICS
    assert got["warnings"] == [f"showing the last 20 runs ({20 * _METRICS} rows); "
                               f"{1_000_000 - 20 * _METRICS:,} of the log's 1,000,000 rows are not shown"]
    # the baseline is the newest run of inv3 (run 100,000 + 45: inv (45 % 7) == 3), metric m9
    assert got["baseline_run"] == "2026-01-01/100045" and got["baseline"] == 10 + (45 * 20 + 9) % 17 + 0.5
    with open(path, "rb") as fh:
        head = fh.read(200)
        fh.seek(size)
        tail = fh.read().decode()
    assert head.startswith(b"format_version,run_id") and tail.count("\n") == 1 and ",inv3,trace3,,m9,30.0," in tail


def test_perfkit_log_shows_the_last_runs_and_says_how_many_rows_it_left_out(tmp_path):
    log = PerfLog(tmp_path / "perf_log.csv")
    for run in range(5):
        log.append_many([{"investigation": "a", "metric": f"m{m}", "value": 1.0 + run, "run_id": f"r{run}"}
                         for m in range(3)])
    out = run_main("log", "--path", log.path, "--runs", "2")
    out.assert_clean(codes=(0,))
    assert len([line for line in out.out.splitlines() if line.startswith("| 20")]) == 6  # 2 runs x 3 metrics
    assert "showing the last 2 runs (6 rows); 9 of the log's 15 rows are not shown" in out.err
    everything = run_main("log", "--path", log.path, "--all")
    assert everything.err == "" and len([line for line in everything.out.splitlines() if line.startswith("| 20")]) == 15


def test_a_utf8_bom_before_the_header_is_accepted(tmp_path):
    # Excel and Notepad save CSV with a BOM: the log was "not a perfkit perf log".
    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation="a", metric="m", value=1.0, unit="ms", run_id="r1")
    log.path.write_bytes(b"\xef\xbb\xbf" + log.path.read_bytes())
    row = log.append(investigation="a", metric="m", value=2.0, unit="ms", run_id="r2")
    assert row["baseline"] == 1.0
    assert list(log.read()["value"]) == [1.0, 2.0] and list(log.read(last_runs=1)["value"]) == [2.0]
    run_main("log", "--path", log.path).assert_clean(codes=(0,))


def test_crlf_line_ends_read_as_lf(tmp_path):
    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation="a", metric="m", value=1.0, unit="ms", run_id="r1")
    log.path.write_bytes(log.path.read_bytes().replace(b"\n", b"\r\n"))
    assert log.append(investigation="a", metric="m", value=2.0, unit="ms", run_id="r2")["baseline"] == 1.0
    assert list(log.read()["value"]) == [1.0, 2.0] and list(log.read(last_runs=5)["value"]) == [1.0, 2.0]
