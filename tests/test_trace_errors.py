"""Bad input gets a TraceError naming the file and the problem; the CLI prints one line and exits non-zero."""
import gzip
import json

import pytest

from perfkit.cli import main
from perfkit.errors import TraceError, TruncatedTraceError
from perfkit.trace import load_trace

GOOD = {
    "schemaVersion": 1,
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 125, "dur": 5},
    ],
    "traceName": "t",
}


def kineto_text(doc) -> bytes:
    """Kineto's layout: one event per line."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = ",\n".join("  " + json.dumps(e) for e in doc["traceEvents"])
    return (json.dumps(head)[:-1] + ', "traceEvents": [\n' + lines + "\n]}").encode()


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def error_of(path, **kw) -> TraceError:
    with pytest.raises(TraceError) as info:
        load_trace(path, **kw)
    assert str(path) in str(info.value)
    return info.value


def test_good_file_in_kineto_layout_loads(tmp_path):
    trace = load_trace(write(tmp_path, "ok.json", kineto_text(GOOD)))
    assert list(trace.events["name"].astype(str)) == ["ProfilerStep#1", "aten::mm", "aten::add"]
    assert trace.files[0].trace_name == "t"


@pytest.mark.parametrize("data, needle", [
    (b"", "empty"),
    (b"   \n", "empty"),
    (b"hello, not json", "not valid JSON"),
    (b'{"schemaVersion": 1, "events": []}', "no 'traceEvents'"),
    (b'{"traceEvents": []}', "traceEvents is empty"),
    (b'{"traceEvents": [1, 2]}', "not an event object"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "dur": 3}]}', "'ts' is missing"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "ts": 3}]}', "'dur' is missing"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "ts": 3, "dur": -5}]}', "outside 0..604800000000 us (a week) (first: 'a' with -5)"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "ts": 1' + b"0" * 400 + b', "dur": 5}]}',
     "traceEvents[0] has a field of an unexpected type (ts: Number out of range)"),  # past float64, as 1e400
    (b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "cat": "cpu_op", "ts": 3, "dur": 5}]}', "not valid UTF-8"),
])
def test_bad_json_is_a_clear_error(tmp_path, data, needle):
    err = error_of(write(tmp_path, "bad.json", data))
    assert needle in str(err)


def test_truncated_gzip(tmp_path):
    data = gzip.compress(kineto_text(GOOD))
    path = write(tmp_path, "cut.json.gz", data[: len(data) // 2])
    assert "gzip data is truncated" in str(error_of(path))


def test_json_cut_off_mid_write_offers_salvage(tmp_path):
    text = kineto_text(GOOD)
    cut = text[: text.index(b'"aten::add"')]
    path = write(tmp_path, "killed.json", cut)
    err = error_of(path)
    assert isinstance(err, TruncatedTraceError)
    assert err.recoverable == 2 and "salvage=True" in str(err)
    trace = load_trace(path, salvage=True)
    assert len(trace.events) == 2
    assert any("recovered 2 complete events" in w for w in trace.warnings)


def test_missing_path_and_empty_directory(tmp_path):
    assert "no such file" in str(error_of(tmp_path / "nope.json"))
    (tmp_path / "d").mkdir()
    assert "no trace files" in str(error_of(tmp_path / "d"))


def test_compact_single_line_json_loads(tmp_path):
    trace = load_trace(write(tmp_path, "compact.json", json.dumps(GOOD, separators=(",", ":")).encode()))
    assert len(trace.events) == 3


def test_pretty_printed_json_loads_and_matches(tmp_path):
    trace = load_trace(write(tmp_path, "pretty.json", json.dumps(GOOD, indent=2).encode()))
    assert list(trace.events["dur_us"]) == [50.0, 10.0, 5.0]


def test_bare_array_of_events(tmp_path):
    trace = load_trace(write(tmp_path, "array.json", json.dumps(GOOD["traceEvents"]).encode()))
    assert len(trace.events) == 3


def test_cli_prints_one_line_and_exits_nonzero(tmp_path, capsys):
    path = write(tmp_path, "bad.json", b"{not json")
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "not valid JSON" in err[0]


def test_cli_summary_json_keys(tmp_path, capsys):
    path = write(tmp_path, "ok.json.gz", gzip.compress(kineto_text(GOOD)))
    assert main(["summary", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("trace", "ranks", "devices", "events", "steps", "gpu", "memcpy", "syncs"):
        assert key in out
    assert out["events"]["total"] == 3 and out["steps"]["count"] == 1
    assert set(out["memcpy"]) == {"HtoD", "DtoH", "DtoD"}
    assert set(out["memcpy"]["HtoD"]) == {"count", "bytes", "time_us", "pageable_count", "pinned_count"}


@pytest.mark.parametrize("cut", ["gzip", "json"])
def test_a_cut_off_file_says_how_to_salvage_it_on_the_cli_and_in_python(tmp_path, capsys, cut):
    """The advice names what each place can do: `--salvage` on the commands that take it, salvage=True in
    Python (the truncated-gzip error named load_trace only, which `perfkit diagnose` cannot call); the commands
    it names take the flag and recover the events."""
    import perfkit.cli

    text = kineto_text(GOOD)
    data = gzip.compress(text)[:len(gzip.compress(text)) // 2] if cut == "gzip" else text[:text.index(b'"aten::add"')]
    path = write(tmp_path, "cut.json.gz" if cut == "gzip" else "cut.json", data)
    message = str(error_of(path))
    assert "`perfkit summary --salvage FILE`" in message and "`perfkit export --salvage`" in message
    assert "load_trace(FILE, salvage=True)" in message
    assert perfkit.cli.main(["diagnose", str(path)]) != 0 and "--salvage" in capsys.readouterr().err
    salvaged = perfkit.cli.main(["summary", "--salvage", "--json", str(path)])
    assert salvaged == 0 or "no complete event can be recovered" in capsys.readouterr().err  # half a tiny gzip: none
