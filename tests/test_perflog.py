import argparse
import csv
import json
import math
import multiprocessing as mp

import pytest

import perfkit.cli
from perfkit.errors import ParameterError, PerfkitError
from perfkit.report.perflog import (
    COLUMNS, FORMAT_VERSION, PerfLog, PerfLogError, classify_change, infer_higher_is_better,
)

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


@pytest.mark.parametrize("value, baseline, hib, noise, ci, expected", [
    (90, 100, False, 5.0, None, "improved"),
    (110, 100, False, 5.0, None, "regressed"),
    (103, 100, False, 5.0, None, "within noise"),
    (97, 100, False, 5.0, None, "within noise"),
    (103, 100, False, 2.0, None, "regressed"),
    (110, 100, True, 5.0, None, "improved"),
    (90, 100, True, 5.0, None, "regressed"),
    (90, None, False, 5.0, None, "no baseline"),
    (90, math.nan, False, 5.0, None, "no baseline"),
    (3, 0, False, 5.0, None, "regressed"),
    # The CI on value/baseline decides alone, whatever the point estimate says.
    (120, 100, False, 5.0, (0.98, 1.03), "within noise"),
    (101, 100, False, 5.0, (1.005, 1.02), "regressed"),
    (99, 100, False, 5.0, (0.97, 0.995), "improved"),
    (99, 100, True, 5.0, (0.97, 0.995), "regressed"),
])
def test_classify_change(value, baseline, hib, noise, ci, expected):
    assert classify_change(value, baseline, higher_is_better=hib, noise_pct=noise, ci=ci) == expected


@pytest.mark.parametrize("metric, unit, expected", [
    ("step_ms", "ms", False), ("peak_mem", "bytes", False), ("throughput", "samples/s", True),
    ("tokens", "tok/s", True), ("speedup", "x", True), ("sync_count", "", False),
    ("syncs", "syncs/step", False), ("copies", "copies/sample", False), ("h2d", "GB/sec", True),
])
def test_infer_higher_is_better(metric, unit, expected):
    assert infer_higher_is_better(metric, unit) is expected


def test_append_fills_baseline_delta_and_verdict_per_device(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    first = log.append(investigation="cpu_bound", metric="step_ms", value=100.0, unit="ms", device="cpu")
    other = log.append(investigation="cpu_bound", metric="step_ms", value=50.0, unit="ms", device="H100")
    second = log.append(investigation="cpu_bound", metric="step_ms", value=80.0, unit="ms", device="cpu",
                        change="pin_memory=True")
    assert (first["verdict"], other["verdict"]) == ("no baseline", "no baseline")
    assert second["baseline"] == 100.0 and second["delta_pct"] == pytest.approx(-20.0)
    assert second["verdict"] == "improved" and second["format_version"] == FORMAT_VERSION
    assert second["date"] == first["date"] and len(second["date"]) == 10
    assert second["git_commit"] and second["host"] and second["torch_version"]
    assert list(log.read()["value"]) == [100.0, 50.0, 80.0]


def test_append_uses_given_baseline_verdict_ci_and_direction(tmp_path):
    log = PerfLog(tmp_path / "log.csv", noise_pct=1.0)
    rows = log.append_many([
        dict(investigation="a", metric="tput", value=100, unit="samples/s"),
        dict(investigation="a", metric="tput", value=90, unit="samples/s"),
        dict(investigation="a", metric="tput", value=90, unit="samples/s", baseline=80),
        dict(investigation="a", metric="t", value=10, unit="ms", baseline=10.5, verdict="slower"),
        dict(investigation="a", metric="t", value=10, unit="ms", baseline=20, ci_low=0.9, ci_high=1.1),
        dict(investigation="a", metric="t", value=10, unit="ms", baseline=10.2, higher_is_better=True),
        dict(investigation="a", metric="t", value=10, unit="ms", baseline=10.2, noise_pct=5),
        dict(investigation="a", metric="t", value=9, unit="ms", ci_low=0.8, ci_high=0.95, verdict="no change"),
        dict(investigation="a", metric="t", value=9, unit="ms", verdict="insufficient data"),
    ])
    assert list(rows["verdict"]) == ["no baseline", "regressed", "improved", "regressed", "within noise",
                                      "regressed", "within noise", "within noise", "not enough data"]
    assert list(rows["baseline"].iloc[1:3]) == [100.0, 80.0]
    assert list(log.read()["verdict"]) == list(rows["verdict"])


@pytest.mark.parametrize("fields, match", [
    (dict(investigation="a", metric="m", value=1, colour="red"), "unknown field.*colour.*valid fields"),
    (dict(investigation="a", metric="m"), "missing required field.*value"),
    (dict(investigation="a", metric="m", value="fast"), "value='fast' is not a number"),
    (dict(investigation="a", metric="m", value=math.inf), "finite"),
    (dict(investigation="a", metric="m", value=1, verdict="great"), "verdict='great'"),
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
    log.append(investigation="a", metric="m", value=1.0, unit="ms")
    log.append(investigation="a", metric="m", value=2.0, unit="ms")
    return log


@pytest.mark.parametrize("bad_line, match", [
    ("1,2024-01-01,oops", r"log\.csv:4: corrupt row: 3 fields"),
    ("1,2024-13-01,,a,,m,1.0,ms,,,no baseline,false,,,abc,cpu,2,h", r"log\.csv:4: corrupt row"),
    ("1,2024-01-01,,a,,m,fast,ms,,,no baseline,false,,,abc,cpu,2,h", r"log\.csv:4: corrupt row"),
    ("1,2024-01-01,,a,,m,1.0,ms,,,great,false,,,abc,cpu,2,h", r"log\.csv:4: corrupt row"),
    ('1,2024-01-01,,"a,,m,1.0', r"log\.csv:4: corrupt row"),
    ("2,2024-01-01,,a,,m,1.0,ms,,,no baseline,false,,,abc,cpu,2,h,extra", r"log\.csv:4: .*format 2.*upgrade"),
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
    path.write_text("format_version,date,metric,value,new_column\n2,2024-01-01,m,1,x\n")
    with pytest.raises(PerfLogError, match="format 2, this perfkit reads format 1: upgrade"):
        PerfLog(path).read()


def test_missing_log_is_an_error_unless_missing_ok(tmp_path):
    log = PerfLog(tmp_path / "nope.csv")
    with pytest.raises(PerfLogError, match="no perf log here"):
        log.read()
    assert log.read(missing_ok=True).columns.tolist() == list(COLUMNS)


def test_append_after_a_line_without_newline_keeps_rows_apart(tmp_path):
    log = _valid_log(tmp_path)
    log.path.write_bytes(log.path.read_bytes().rstrip(b"\n"))
    log.append(investigation="a", metric="m", value=3.0, unit="ms")
    assert list(log.read()["value"]) == [1.0, 2.0, 3.0]


def test_to_markdown_marks_regressions_and_escapes_markup(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(investigation="amp", metric="step_ms", value=10.0, unit="ms")
    log.append(investigation="amp", metric="step_ms", value=12.5, unit="ms", change=f"{HOSTILE} | [x](javascript:1)")
    log.append(investigation="other", metric="tput", value=5.0, unit="samples/s")
    text = log.to_markdown()
    lines = text.strip().split("\n")
    assert lines[0] == "| date | investigation | change | metric | before -> after | delta | verdict |"
    assert len(lines) == 5
    assert "10 -> 12.5 ms | +25.0% | **REGRESSED** |" in lines[3]
    assert "<script>" not in text and "\\<script\\>" in text and "\\[x\\]" in text
    # Only the 8 column separators are bare pipes; the one in the change text is escaped.
    assert lines[3].replace("\\|", "").count("|") == 8
    assert "other" not in log.to_markdown(investigation="amp")


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
    log.append(investigation="a", metric=HOSTILE, value=1.0, unit="ms")
    log.append(investigation="a", metric=HOSTILE, value=2.0, unit="ms", change=HOSTILE)
    html = log._repr_html_()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert html.count('class="regressed"') == 1 and "REGRESSED" in html
