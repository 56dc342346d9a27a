import argparse
import csv
import json
import math
import multiprocessing as mp

import pytest

import perfkit.cli
from perfkit.errors import ParameterError, PerfkitError
from perfkit.report.perflog import (
    COLUMNS, FORMAT_VERSION, MIN_EFFECT, RUN_TO_RUN, Z, PerfLog, PerfLogError, infer_higher_is_better,
)
from perfkit.report.perflog.judge import Measurement, judge
from perfkit.report.rows import trace_step_rows
from perfkit.trace import load_trace
from tracebuilder import TraceBuilder

HOSTILE = "<script>alert(1)</script>"
N_PROCS, N_ROWS = 8, 50


def _appender(path, proc, barrier):
    log = PerfLog(path)
    barrier.wait()
    for i in range(N_ROWS):
        # Commas, quotes and a newline exercise CSV quoting under contention.
        log.append(investigation="shared", metric="step_ms", value=proc * 1000 + i, unit="ms",
                   change=f'p{proc}, "row" {i}\nnext', run_id=f"{proc}-{i}", device="cpu")


def test_concurrent_appenders_keep_every_row_intact(tmp_path):
    path = tmp_path / "perf_log.csv"
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(N_PROCS)
    procs = [ctx.Process(target=_appender, args=(path, p, barrier)) for p in range(N_PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * N_PROCS

    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == 1 + N_PROCS * N_ROWS + 1
    assert all(len(r) == len(COLUMNS) for r in csv.reader(lines[1:-1]))

    frame = PerfLog(path).read()
    expected = {p * 1000 + i for p in range(N_PROCS) for i in range(N_ROWS)}
    assert sorted(frame["value"]) == sorted(expected)  # each value exactly once
    for proc in range(N_PROCS):
        rows = frame[frame["run_id"].str.startswith(f"{proc}-")]
        assert list(rows["run_id"]) == [f"{proc}-{i}" for i in range(N_ROWS)]
        assert list(rows["value"]) == [proc * 1000 + i for i in range(N_ROWS)]
        assert list(rows["change"]) == [f'p{proc}, "row" {i} next' for i in range(N_ROWS)]
    # Baselines are read under the same lock as the write, so across all writers each row's
    # baseline is the row just before it (without the lock two writers read the same one).
    assert math.isnan(frame["baseline"].iloc[0])
    assert list(frame["baseline"].iloc[1:]) == list(frame["value"].iloc[:-1])


def _m(value, ci=None, run="r"):
    lo, hi = ci if ci else (math.nan, math.nan)
    return Measurement(run, float(value), float(lo), float(hi))


@pytest.mark.parametrize("current, base, history, hib, expected", [
    # CIs of +/-1%: only the run-to-run floor (10%) and the 10% minimum effect matter.
    (_m(100, (99, 101)), _m(100, (99, 101), "p"), [], False, "unchanged"),
    (_m(105, (104, 106)), _m(100, (99, 101), "p"), [], False, "within noise"),
    (_m(130, (129, 131)), _m(100, (99, 101), "p"), [], False, "within noise"),  # < Z * sqrt(2) * 10%
    (_m(200, (198, 202)), _m(100, (99, 101), "p"), [], False, "regressed"),      # a 2x slowdown
    (_m(50, (49, 51)), _m(100, (99, 101), "p"), [], False, "improved"),
    (_m(200, (198, 202)), _m(100, (99, 101), "p"), [], True, "improved"),        # a rate doubled
    # With a quiet history (3+ runs) the band narrows to what the metric really does.
    (_m(115, (114, 116)), _m(100, (99, 101), "p"), [_m(v, (v - 1, v + 1)) for v in (100, 100.5, 99.5)], False,
     "regressed"),
    (_m(105, (104, 106)), _m(100, (99, 101), "p"), [_m(v, (v - 1, v + 1)) for v in (100, 100.5, 99.5)], False,
     "within noise"),  # beyond the noise, below the 10% minimum effect
    # A wide CI of its own hides a large change.
    (_m(200, (100, 400)), _m(100, (99, 101), "p"), [], False, "within noise"),
    # No CI: judged by history alone, "not enough data" without one.
    (_m(200), _m(100, run="p"), [], False, "not enough data"),
    (_m(200), _m(100, run="p"), [_m(v) for v in (100, 101, 99)], False, "regressed"),
    # Exact figures (counted from a fixed input): any change beyond 10% is real.
    (_m(3, (3, 3)), _m(2, (2, 2), "p"), [], False, "regressed"),
    (_m(3, (3, 3)), _m(0, (0, 0), "p"), [], False, "regressed"),
    (_m(1.05, (1.05, 1.05)), _m(1, (1, 1), "p"), [], False, "within noise"),
    (_m(1, (1, 1)), None, [], False, "no baseline"),
])
def test_judge(current, base, history, hib, expected):
    assert judge(current, base, history, higher_is_better=hib) == expected


def test_false_alarms_per_run_stay_under_five_percent():
    """18 unchanged metrics a run, each measured with the noise its CI states (2%) plus
    run-to-run noise as large as RUN_TO_RUN: at most 5% of runs may flag any of them."""
    import numpy as np

    rng = np.random.default_rng(1)
    runs, flagged = 2000, 0
    for _ in range(runs):
        verdicts = []
        for _ in range(18):
            base, cur = 100 * np.exp(RUN_TO_RUN * rng.standard_normal(2) + rng.normal(0, 0.02, 2))
            verdicts.append(judge(_m(cur, (cur - 3.92, cur + 3.92)), _m(base, (base - 3.92, base + 3.92), "p"), [],
                                  higher_is_better=False))
        flagged += any(v in ("regressed", "improved") for v in verdicts)
    assert flagged / runs <= 0.05, flagged / runs
    assert Z == pytest.approx(3.02, abs=0.01) and MIN_EFFECT == 0.10


@pytest.mark.parametrize("metric, unit, expected", [
    ("step_ms", "ms", False), ("peak_mem", "bytes", False), ("throughput", "samples/s", True),
    ("tokens", "tok/s", True), ("speedup", "x", True), ("sync_count", "", False),
    ("syncs", "syncs/step", False), ("copies", "copies/sample", False), ("h2d", "GB/sec", True),
])
def test_infer_higher_is_better(metric, unit, expected):
    assert infer_higher_is_better(metric, unit) is expected


def _row(run, value, half=1.0, **extra):
    return dict(investigation="cpu_bound", subject="trace t.json.gz", metric="step_ms", value=value, unit="ms",
                device="cpu", run_id=run, ci_low=value - half, ci_high=value + half, **extra)


def test_baseline_is_the_previous_run_of_the_same_subject_and_device(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    first = log.append(**_row("r1", 100.0))
    other = log.append(**{**_row("r2", 50.0), "device": "H100"})
    subject = log.append(**{**_row("r3", 10.0), "subject": "live ppo"})
    second = log.append(**_row("r4", 200.0, change="pin_memory=False"))
    assert [r["verdict"] for r in (first, other, subject)] == ["no baseline"] * 3
    assert second["baseline"] == 100.0 and second["baseline_run"] == "r1" and second["delta_pct"] == pytest.approx(100)
    assert second["verdict"] == "regressed" and second["format_version"] == FORMAT_VERSION
    assert second["git_commit"] and second["host"] and second["torch_version"] and second["time"]


def test_rows_of_one_run_are_never_each_others_baseline(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**_row("r1", 100.0))
    rows = log.append_many([_row("r2", 30.0), _row("r2", 300.0)])  # e.g. the two arms of an A/B, same name
    assert list(rows["baseline"]) == [100.0, 100.0] and list(rows["baseline_run"]) == ["r1", "r1"]


def test_a_run_id_is_made_per_call_and_date_is_honoured(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    rows = log.append_many([{**_row("", 1.0), "date": "2024-02-03"}, {**_row("", 2.0), "metric": "b"}])
    assert rows["run_id"].nunique() == 1 and rows["run_id"].iloc[0].count("/") == 1
    assert list(rows["date"]) == ["2024-02-03", rows["run_id"].iloc[0][:10]]


def test_unchanged_figures_are_logged_once(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    exact = dict(_row("r1", 32.0), ci_low=32.0, ci_high=32.0, metric="syncs_per_step")
    log.append(**exact)
    again = log.append(**{**exact, "run_id": "r2"})
    assert again["verdict"] == "unchanged" and len(log.read()) == 1
    changed = log.append(**{**exact, "run_id": "r3", "value": 40.0, "ci_low": 40.0, "ci_high": 40.0})
    assert changed["verdict"] == "regressed" and changed["baseline_run"] == "r1" and len(log.read()) == 2


def test_a_disturbed_measurement_is_not_judged(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**_row("r1", 100.0))
    noisy = log.append(**_row("r2", 300.0, quality="load average 7.6 on 2 cores while measuring"))
    after = log.append(**_row("r3", 310.0))
    assert noisy["verdict"] == "not enough data" and after["verdict"] == "not enough data"  # its baseline was noisy
    assert log.append(**_row("r4", 305.0))["verdict"] == "within noise"
    from perfkit.report.rows import load_note

    assert load_note(7.6, 2) == "load average 7.6 on 2 cores while measuring" and load_note(1.0, 2) == ""


def test_given_direction_and_ci_are_used(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**_row("r1", 100.0, higher_is_better=True))
    assert log.append(**_row("r2", 200.0, higher_is_better=True))["verdict"] == "improved"
    assert log.append(**_row("r3", 100.0, half=150.0))["verdict"] == "within noise"


@pytest.mark.parametrize("fields, match", [
    (dict(investigation="a", metric="m", value=1, colour="red"), "unknown field.*colour.*valid fields"),
    (dict(investigation="a", metric="m"), "missing required field.*value"),
    (dict(investigation="a", metric="m", value="fast"), "value='fast' is not a number"),
    (dict(investigation="a", metric="m", value=math.inf), "finite"),
    (dict(investigation="a", metric="m", value=1, verdict="great"), "unknown field.*verdict"),
    (dict(investigation="a", metric="m", value=1, baseline=2), "unknown field.*baseline"),
    (dict(investigation="a", metric="m", value=1, ci_low=0.9), "ci_low <= ci_high"),
    (dict(investigation="a", metric="m", value=1, date="yesterday"), "ISO date"),
])
def test_append_rejects_bad_fields_and_writes_nothing(tmp_path, fields, match):
    log = PerfLog(tmp_path / "log.csv")
    with pytest.raises(ParameterError, match=match):
        log.append(**fields)
    assert not log.path.exists()


def _valid_log(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(investigation="a", metric="m", value=1.0, unit="ms", run_id="r1")
    log.append(investigation="a", metric="m", value=2.0, unit="ms", run_id="r2")
    return log


_GOOD = "2,r9,t,2024-01-01,a,,,m,1.0,ms,,,,,,no baseline,false,,abc,cpu,2,h"


@pytest.mark.parametrize("bad_line, match", [
    ("2,2024-01-01,oops", r"log\.csv:4: corrupt row: 3 fields"),
    (_GOOD.replace("2024-01-01", "2024-13-01"), r"log\.csv:4: corrupt row"),
    (_GOOD.replace(",1.0,", ",fast,"), r"log\.csv:4: corrupt row"),
    (_GOOD.replace("no baseline", "great"), r"log\.csv:4: corrupt row"),
    ('2,2024-01-01,,"a,,m,1.0', r"log\.csv:4: corrupt row"),
    ("3" + _GOOD[1:] + ",extra", r"log\.csv:4: .*format 3.*upgrade"),
])
def test_corrupt_row_names_file_and_line(tmp_path, bad_line, match):
    log = _valid_log(tmp_path)
    with open(log.path, "a") as fh:
        fh.write(bad_line + "\n")
    before = log.path.read_bytes()
    with pytest.raises(PerfLogError, match=match) as info:
        log.read()
    assert isinstance(info.value, PerfkitError)
    with pytest.raises(PerfLogError):
        log.append(investigation="a", metric="m", value=3.0)
    assert log.path.read_bytes() == before  # never rewritten, nothing appended


def test_unknown_header_and_newer_format_are_refused(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("date,metric,value\n2024-01-01,m,1\n")
    with pytest.raises(PerfLogError, match=r"log\.csv:1: header is not a perfkit perf log"):
        PerfLog(path).read()
    path.write_text("format_version,date,metric,value,new_column\n3,2024-01-01,m,1,x\n")
    with pytest.raises(PerfLogError, match="format 3, this perfkit reads format 2: upgrade"):
        PerfLog(path).read()
    old = "format_version,date,run_id,investigation,change,metric,value\n1,2024-01-01,r,a,,m,1\n"
    path.write_text(old)
    with pytest.raises(PerfLogError, match="format 1.*move the file aside"):
        PerfLog(path).append(investigation="a", metric="m", value=1.0)
    assert path.read_text() == old


def test_missing_log_is_an_error_unless_missing_ok(tmp_path):
    log = PerfLog(tmp_path / "nope.csv")
    with pytest.raises(PerfLogError, match="no perf log here"):
        log.read()
    assert log.read(missing_ok=True).columns.tolist() == list(COLUMNS)


def test_append_after_a_line_without_newline_keeps_rows_apart(tmp_path):
    log = _valid_log(tmp_path)
    log.path.write_bytes(log.path.read_bytes().rstrip(b"\n"))
    log.append(investigation="a", metric="m", value=3.0, unit="ms", run_id="r3")
    assert list(log.read()["value"]) == [1.0, 2.0, 3.0]


def test_to_markdown_marks_regressions_and_escapes_markup(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**{**_row("r1", 10.0), "investigation": "amp"})
    log.append(**{**_row("r2", 25.0), "investigation": "amp", "change": f"{HOSTILE} | [x](javascript:1)"})
    log.append(investigation="other", metric="tput", value=5.0, unit="samples/s")
    text = log.to_markdown()
    lines = text.strip().split("\n")
    assert lines[0] == ("| date | investigation | subject | change | metric | before -> after | delta | verdict "
                        "| note |")
    assert len(lines) == 5
    assert "10 -> 25 ms | +150.0% | **REGRESSED** |" in lines[3]
    assert "<script>" not in text and "\\<script\\>" in text and "\\[x\\]" in text
    # Only the 10 column separators are bare pipes; the one in the change text is escaped.
    assert lines[3].replace("\\|", "").count("|") == 10
    assert "other" not in log.to_markdown(investigation="amp")


def test_to_markdown_shows_subject_and_why_there_was_not_enough_data(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**_row("r1", 10.0))
    busy = "load average 5.2 on 2 cores: timings disturbed"
    log.append(**_row("r2", 12.0, quality=busy))
    log.append(**{**_row("r3", 653.7), "subject": "live ppo item_logging"})
    lines = log.to_markdown().strip().split("\n")
    assert "| trace t.json.gz |" in lines[2] and "| live ppo item_logging |" in lines[4]
    assert lines[3].endswith(f"| not enough data | {busy} |")


def _cli(argv, capsys, monkeypatch):
    monkeypatch.setattr(perfkit.cli, "COMMANDS", ("log",))
    rc = perfkit.cli.main(argv)
    return rc, capsys.readouterr()


def test_cli_log_prints_markdown_and_json(tmp_path, capsys, monkeypatch):
    log = _valid_log(tmp_path)
    rc, out = _cli(["log", "--path", str(log.path)], capsys, monkeypatch)
    assert rc == 0 and out.out.startswith("| date | investigation |") and "1 -> 2 ms" in out.out
    rc, out = _cli(["log", "--path", str(log.path), "--json", "--investigation", "a"], capsys, monkeypatch)
    records = json.loads(out.out)
    assert rc == 0 and [r["value"] for r in records] == [1.0, 2.0] and records[1]["baseline"] == 1.0
    rc, out = _cli(["log", "--path", str(log.path), "--json", "--investigation", "zzz"], capsys, monkeypatch)
    assert rc == 0 and json.loads(out.out) == []


def test_cli_log_missing_file_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    rc, out = _cli(["log", "--path", str(tmp_path / "none.csv")], capsys, monkeypatch)
    assert rc == 2 and out.out == ""
    assert out.err.count("\n") == 1 and "no perf log here" in out.err


def test_cli_log_register_builds_its_own_parser(tmp_path):
    from perfkit.cli import log as log_cli

    parser = argparse.ArgumentParser()
    log_cli.register(parser.add_subparsers())
    args = parser.parse_args(["log", "--path", str(tmp_path / "x.csv"), "--json"])
    assert args.func is log_cli.run and args.json and args.investigation is None


def test_repr_html_escapes_and_marks_regressions(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(**{**_row("r1", 1.0, half=0.01), "metric": HOSTILE})
    log.append(**{**_row("r2", 2.0, half=0.01), "metric": HOSTILE, "change": HOSTILE})
    html = log._repr_html_()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert html.count("REGRESSED") == 1


def test_display_frame_shows_the_subject(tmp_path):
    from perfkit.report.perflog import display_frame

    log = PerfLog(tmp_path / "log.csv")
    log.append(**_row("r1", 10.0))
    shown = display_frame(log.read())
    assert list(shown.columns[:3]) == ["run", "investigation", "subject"] and shown["subject"].tolist() == ["trace t.json.gz"]


@pytest.mark.parametrize("load, note", [(2.0, ""), (2.01, "load average 2.0 on 2 cores while measuring"),
                                        (None, "")])
def test_a_trace_recorded_on_a_busy_machine_gets_its_quality_note(tmp_path, load, note):
    b = TraceBuilder()
    b.metadata["perfkit_profile"] = {"load_1min": load, "cpus": 2}
    for s in range(3):
        b.step(s, s * 1000, 1000)
    (r,) = trace_step_rows("x", load_trace(b.write(tmp_path / "t.json"), use_cache=False), "t.json", "cpu")
    assert r["quality"] == note
