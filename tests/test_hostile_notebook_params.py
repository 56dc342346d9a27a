"""Fuzz, round 2, new category: the investigation notebooks' parameters (`perfkit run NAME -p KEY
VALUE`). Each notebook's first cell hands mode, trace_path, workload, variant, device, steps, warmup
and overrides to ``live.load_source``; hostile values must be a ParameterError there (the run then
names the cell), before any workload is built or profiled: a trace_path that is a number or too long
was a TypeError/OSError, overrides that are not a dict a TypeError, and steps/warmup/samples of 10**30
ran until killed."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import run_main
from perfkit.errors import ParameterError, TraceError
from perfkit.workbook import find_trace
from perfkit.bench.live import load_source

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NOT_TEXT = st.one_of(st.integers(), st.none(), st.booleans(), st.floats(allow_nan=True),
                     st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
BAD_COUNT = st.one_of(st.integers(max_value=0), st.integers(min_value=10_001, max_value=10**40), st.floats(),
                      st.text(max_size=4), st.booleans(), st.none())


@FAST
@given(mode=st.one_of(NOT_TEXT, st.text(max_size=8).filter(lambda m: m not in ("trace", "live"))))
def test_generated_modes_are_refused(mode):
    with pytest.raises(ParameterError, match="mode="):
        load_source(mode, "cpu/mppi_float_tensor.json.gz")


@FAST
@given(path=NOT_TEXT)
def test_generated_trace_paths_that_are_not_text(path):
    with pytest.raises(ParameterError, match="trace_path="):
        find_trace(path)


@pytest.mark.parametrize("path", ["a" * 5_000, "x/" * 3_000 + "t.json", "\x1b[31m.json", "", "no_such.json.gz"])
def test_trace_paths_that_name_nothing(path):
    with pytest.raises(ParameterError, match="trace_path="):
        find_trace(path)


def test_trace_paths_that_are_not_files(tmp_path):
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with pytest.raises(TraceError, match="not a regular file"):
            load_source("trace", path)


@FAST
@given(key=st.sampled_from(["steps", "warmup"]), value=BAD_COUNT)
def test_generated_step_counts_are_refused_before_profiling(key, value):
    if key == "warmup" and isinstance(value, int) and not isinstance(value, bool) and value == 0:
        value = -1  # 0 warm-up steps is valid
    with pytest.raises(ParameterError, match=f"{key}="):
        load_source("live", workload="mppi", variant="float_tensor", device="cpu", **{key: value})


@FAST
@given(overrides=st.one_of(
    st.lists(st.integers(), max_size=2), st.text(max_size=3), st.integers(), st.booleans(),
    st.fixed_dictionaries({"samples": BAD_COUNT.filter(lambda v: not (isinstance(v, int) and 1 <= v <= 2**31 - 1))}),
    st.dictionaries(st.sampled_from(["__class__", "__init__", "nope", "samples "]), st.integers(), min_size=1, max_size=2)))
def test_generated_overrides_are_refused(overrides):
    with pytest.raises(ParameterError):
        load_source("live", workload="mppi", variant="float_tensor", device="cpu", overrides=overrides)


@pytest.mark.parametrize("kwargs", [dict(workload="nope"), dict(workload=5), dict(workload=[1]), dict(workload={"a": 1}),
                                    dict(variant="nope"), dict(variant=[1]), dict(device=[1]),
                                    dict(device="tpu"), dict(device=5)])
def test_unknown_workloads_variants_and_devices(kwargs):
    with pytest.raises(ParameterError):
        load_source("live", **{"workload": "mppi", "variant": "float_tensor", "device": "cpu", **kwargs})


# --- `perfkit run NAME -p KEY VALUE`: refused before any kernel starts --------------------------

COUNTS = {"cpu_bound": ("top", "steps", "warmup"), "step_anatomy": ("top", "max_depth"), "ranks": ("top",),
          "sync_points": ("detect_steps", "steps"), "htod": ("sweep_repeats",)}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from([(n, k) for n, keys in COUNTS.items() for k in keys]),
       value=st.one_of(st.integers(max_value=-1), st.just(-(10**30))))
def test_generated_negative_counts_are_refused_before_running(tmp_path_factory, case, value):
    name, key = case
    out_dir = tmp_path_factory.mktemp("reports")
    out = run_main("run", name, "-p", key, str(value), "--out", out_dir, "--no-progress")
    out.assert_clean(codes=(2,))
    assert f"-p {key} {value}" in out.err and "a count" in out.err, out.why()
    assert not list(out_dir.glob("*/*/*.ipynb"))


@pytest.mark.parametrize("key, value", [("top", "[1]"), ("trace_path", '{"a": 1}'), ("steps", "1e999"),
                                        ("device", "[\"cpu\"]"), ("interactive", "{}")])
def test_run_refuses_values_no_notebook_can_use(tmp_path, key, value):
    run_main("run", "cpu_bound", "-p", key, value, "--out", tmp_path, "--no-progress").assert_clean(codes=(2,))
    assert not list(tmp_path.glob("*/*/*.ipynb"))


# -- issue 54: -p values that were tracebacks or could not be given ----------------------------------------------

@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}"), ('[{"a": [', "]}]")])
@pytest.mark.parametrize("depth", [201, 5_000, 50_000])
def test_json_nested_past_the_budget_is_refused_naming_the_variable(tmp_path, opening, closing, depth):
    from perfkit.cli.run import parse_value

    text = opening * depth + ("1" if opening.endswith(":") else "") + closing * depth
    with pytest.raises(ParameterError, match="PERFKIT_MAX_NESTING_DEPTH"):
        parse_value(text)
    out = run_main("run", "cpu_bound", "-p", "overrides", text, "--out", tmp_path, "--no-progress")
    out.assert_clean(codes=(2,))
    assert "PERFKIT_MAX_NESTING_DEPTH" in out.err and not list(tmp_path.glob("*/*/*.ipynb"))


def test_json_within_the_budget_and_brackets_inside_strings_parse():
    from perfkit.cli.run import parse_value

    assert parse_value("[" * 150 + "]" * 150) is not None
    assert parse_value('{"note": "[[[[[[\\"]]"}') == {"note": '[[[[[["]]'}


@pytest.mark.parametrize("change", ["[WIP] pin memory", "{draft} fuse kernels", "[1, 2", "{not json}", "[x] [y]"])
def test_a_text_parameter_takes_text_that_starts_like_json(tmp_path, change):
    from perfkit.cli.run import parse_value

    assert parse_value(change, as_text=True) == change
    with pytest.raises(ParameterError, match="starts like JSON"):
        parse_value(change)  # a parameter that is not text: still refused, not guessed
    out = run_main("run", "tiny_ok", "-p", "change", change, "--out", tmp_path, "--notebook-dir",
                   os.path.join(os.path.dirname(__file__), "fixtures", "notebooks"), "--no-progress")
    out.assert_clean(codes=(0,))
    from perfkit.report.perflog import PerfLog

    assert PerfLog(tmp_path / "perf_log.csv").read()["change"].tolist()[-1:] == [change]


@pytest.mark.parametrize("raw", [b"pin \xff memory", b"\xe9t\xe9", b"\xc3", b"ok \xed\xa0\x80"])
def test_text_that_is_not_utf8_is_refused_before_anything_runs(tmp_path, raw):
    from perfkit.report.perflog import PerfLog

    text = raw.decode("utf-8", "surrogateescape")
    out = run_main("run", "cpu_bound", "-p", "change", text, "--out", tmp_path, "--no-progress")
    out.assert_clean(codes=(2,))
    assert "not UTF-8 text" in out.err and "LANG=C.UTF-8" in out.err and not list(tmp_path.glob("*/*/*.ipynb"))
    with pytest.raises(ParameterError, match="change is not UTF-8 text"):
        PerfLog(tmp_path / "log.csv").append(investigation="i", metric="m", value=1.0, change=text)
    assert not (tmp_path / "log.csv").exists()
