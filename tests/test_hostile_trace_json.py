"""Fuzz, round 2: odd but valid trace JSON (issue 24). Each case must load to the right answer
(with a warning for what was set aside) or be refused in one line naming the file; never a
traceback, never a silent wrong figure."""
import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import Budget, event, run_cli, run_main, write_trace
from perfkit.errors import TraceError
from perfkit.trace import load_trace

FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
STEP = event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500)
COMMANDS = (("summary", "--json"), ("gaps",), ("hotspots",), ("critical-path",), ("syncs",))


def base(**extra):
    return [STEP, event(name="aten::mm", ts=1_100, **extra)]


@pytest.mark.parametrize("props", [5, True, "gpu", {"a": 1}, [5, None], [{"name": "A100", "totalGlobalMem": "lots"}],
                                   [{"name": "A100", "totalGlobalMem": -1}], [{"name": "A100", "totalGlobalMem": 2**70}]])
def test_odd_device_properties_are_set_aside_with_a_warning(tmp_path, props):
    path = write_trace(tmp_path / "t.json", base(), deviceProperties=props)
    trace = load_trace(path, use_cache=False)
    assert all(isinstance(d, dict) and isinstance(d.get("totalGlobalMem", 0), int) for d in trace.devices)
    assert any("deviceProperties" in w for w in trace.warnings)
    for args in COMMANDS:
        run_main(*args, path).assert_clean(json_out="--json" in args, codes=(0,))


def test_memory_table_of_a_device_without_a_usable_size(tmp_path):
    from perfkit.report.tables import recorded_on_table

    gpu = event(cat="kernel", name="k", pid=0, tid=7, ts=1_200, dur=5, args={"device": 0, "stream": 7})
    path = write_trace(tmp_path / "t.json", [*base(), gpu], deviceProperties=[{"name": "A100", "totalGlobalMem": "lots"}])
    table = recorded_on_table(load_trace(path, use_cache=False))
    assert table["device"].tolist() == ["A100"] and table["memory_gib"].tolist() == ["n/a"]


@pytest.mark.parametrize("number", ["99999999999999999999999", str(2**63), "-5", "1e3", "١٢"])
def test_profiler_step_numbers_beyond_int64(tmp_path, number):
    path = write_trace(tmp_path / "t.json", [event(cat="user_annotation", name=f"ProfilerStep#{number}", ts=1_000, dur=500),
                                             event(ts=1_100)])
    trace = load_trace(path, use_cache=False)
    assert len(trace.steps) == 1 and trace.steps["dur_us"].iat[0] == 500
    for args in (*COMMANDS, ("diff", path)):
        run_main(*args, path).assert_clean(json_out="--json" in args, codes=(0, 1))


@pytest.mark.parametrize("value", ["abc", 1.5, 2**70, -5, True, [1], {"ns": 1}])
def test_odd_base_time_is_ignored_with_a_warning(tmp_path, value):
    path = write_trace(tmp_path / "t.json", base(), baseTimeNanoseconds=value)
    trace = load_trace(path, use_cache=False)
    assert trace.files[0].base_time_ns is None and any("baseTimeNanoseconds" in w for w in trace.warnings)
    out = run_main("sql", "SELECT base_time_ns FROM ranks", path, "--json")
    out.assert_clean(codes=(0,))
    assert json.loads(out.out) == {"base_time_ns": None}


def python_frame(pid, parent, ts, dur=10, name=None):
    return event(cat="python_function", name=name or f"f{pid}", ts=ts, dur=dur,
                 args={"Python id": pid, "Python parent id": parent})


@FAST
@given(parents=st.lists(st.integers(min_value=-1, max_value=8), min_size=2, max_size=8))
def test_python_parent_ids_forming_cycles_or_self_loops(tmp_path_factory, parents):
    frames = [python_frame(i, parent, 1_100 + i, dur=50 - i) for i, parent in enumerate(parents)]
    path = write_trace(tmp_path_factory.mktemp("py") / "t.json", [STEP, *frames])
    trace = load_trace(path, use_cache=False)
    ev = trace.events[trace.events["cat"] == "python_function"]
    parent, depth = ev["parent"].to_numpy(), ev["depth"].to_numpy()
    for row, up in zip(ev.index, parent):  # a parent started first: no cycle can survive
        assert up == -1 or trace.events.at[up, "python_id"] < trace.events.at[row, "python_id"]
    assert depth.max() < len(parents)
    run_main("hotspots", "--json", path).assert_clean(json_out=True, codes=(0,))


# --- Chrome B/E duration pairs ------------------------------------------------------------------

def begin(ts, name, tid=1):
    return {"ph": "B", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts}


def end(ts, tid=1):
    return {"ph": "E", "pid": 1, "tid": tid, "ts": ts}


def test_begin_end_pairs_become_complete_events(tmp_path):
    path = write_trace(tmp_path / "t.json", [begin(100, "ProfilerStep#1"), begin(110, "aten::mm"), end(150),
                                             begin(120, "other", tid=2), end(135, tid=2), end(200)])
    trace = load_trace(path, use_cache=False)
    got = {r["name"]: (r["ph"], r["ts_us"], r["dur_us"]) for r in trace.events.to_dict("records")}
    assert got == {"ProfilerStep#1": ("X", 100, 100), "aten::mm": ("X", 110, 40), "other": ("X", 120, 15)}
    assert trace.events.loc[trace.events["name"] == "aten::mm", "depth"].item() == 1
    assert len(trace.steps) == 1 and trace.steps["dur_us"].item() == 100 and not trace.warnings


def test_unbalanced_begin_end_are_dropped_and_counted(tmp_path):
    path = write_trace(tmp_path / "t.json", [end(50), begin(100, "a"), end(120), begin(130, "open"), begin(140, "open2")])
    trace = load_trace(path, use_cache=False)
    assert trace.events["name"].tolist() == ["a"]
    [warning] = [w for w in trace.warnings if "B/E" in w]
    assert "1 B/E duration pairs read" in warning and "2 'B' events never closed" in warning and "1 'E' events" in warning


@st.composite
def nested_spans(draw):
    """Balanced B/E events on up to 3 threads, with the durations they must give (independent count)."""
    events, expected = [], {}
    for tid in range(1, draw(st.integers(1, 3)) + 1):
        t, stack = 0, []
        for k in range(draw(st.integers(1, 12))):
            t += draw(st.integers(0, 5))
            if stack and draw(st.booleans()):
                name, start = stack.pop()
                events.append(end(t, tid))
                expected[name] = t - start
            else:
                name = f"s{tid}_{k}"
                stack.append((name, t))
                events.append(begin(t, name, tid))
        while stack:
            t += 1
            name, start = stack.pop()
            events.append(end(t, tid))
            expected[name] = t - start
    return events, expected


@FAST
@given(case=nested_spans())
def test_generated_nested_begin_end(tmp_path_factory, case):
    events, expected = case
    path = write_trace(tmp_path_factory.mktemp("be") / "t.json", events)
    trace = load_trace(path, use_cache=False)
    assert dict(zip(trace.events["name"].astype(str), trace.events["dur_us"])) == expected
    assert not trace.warnings or "whole trace is one step" in " ".join(trace.warnings)


def test_metadata_only_trace_is_refused(tmp_path):
    path = write_trace(tmp_path / "t.json", [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}] * 3)
    run_main("summary", path).assert_refused(path, "no timed event", "3 'M'")


# --- ranks --------------------------------------------------------------------------------------

def rank_file(path, rank, world_size=2):
    return write_trace(path, base(), distributedInfo={"rank": rank, "world_size": world_size})


def test_three_files_claiming_the_last_rank(tmp_path):
    """Rank 2**31-1 of world size 2 is no rank of that job: each file is a run of its own (issue 53), refused
    with the three listed, and each loads alone as that rank."""
    for i in range(3):
        rank_file(tmp_path / f"r{i}.json", 2**31 - 1)
    with pytest.raises(TraceError, match="holds 3 runs.*rank 2147483647 outside world size 2"):
        load_trace(tmp_path, use_cache=False)
    trace = load_trace(tmp_path, use_cache=False, run=3)
    assert trace.ranks == [2**31 - 1] and [f.claimed_rank for f in trace.files] == [2**31 - 1]
    run_main("summary", "--json", "--run", "1", tmp_path).assert_clean(json_out=True, codes=(0,))


def test_world_size_at_the_limit(tmp_path):
    rank_file(tmp_path / "a.json", 0, world_size=2**31 - 1)
    rank_file(tmp_path / "b.json", 1, world_size=2**31 - 1)
    trace = load_trace(tmp_path, use_cache=False)
    assert trace.ranks == [0, 1] and len(set(trace.events["rank"])) == 2


def test_more_files_than_file_ids_is_refused_before_parsing(tmp_path):
    one = json.dumps({"traceEvents": [event()]})
    for i in range(33_000):
        (tmp_path / f"r{i:05d}.json").write_text(one)
    out = run_cli("summary", tmp_path, budget=Budget(wall_s=60))
    out.assert_refused(tmp_path, "33,000 trace files", "at most 32,767")


# --- several ranks merged into one file ---------------------------------------------------------

def merged(ranks, steps=2):
    events = []
    for r in ranks:
        host, gpu = r * 100_000_000 + 4242, r * 100_000_000
        for s in range(steps):
            t = 1_000 + s * 1_000 + r * 10
            events += [event(cat="user_annotation", name=f"ProfilerStep#{s}", pid=host, tid=7, ts=t, dur=900),
                       event(name="aten::mm", pid=host, tid=7, ts=t + 100, dur=100 + r),
                       event(cat="kernel", name="gemm", pid=gpu, tid=7, ts=t + 200, dur=50, args={"device": 0, "stream": 7})]
    return events


@FAST
@given(ranks=st.lists(st.integers(0, 300), min_size=2, max_size=5, unique=True))
def test_trace_fusion_merged_ranks_are_split(tmp_path_factory, ranks):
    path = write_trace(tmp_path_factory.mktemp("m") / "merged.json", merged(ranks))
    trace = load_trace(path, use_cache=False)
    assert trace.ranks == sorted(ranks) and [f.path for f in trace.files] == [str(path)] * len(ranks)
    for r in ranks:
        ev = trace.events[trace.events["rank"] == r]
        assert len(ev) == 6 and set(ev["file_id"]) == {sorted(ranks).index(r)}
        assert ev.loc[ev["name"] == "aten::mm", "dur_us"].tolist() == [100 + r] * 2
        assert sorted(trace.steps.loc[trace.steps["rank"] == r, "step"]) == [0, 1]
        mm = ev[ev["name"] == "aten::mm"]
        assert (trace.events.loc[mm["parent"], "name"] == "ProfilerStep#0").sum() == 1  # parents within the rank
    assert sum("merged into one file" in w for w in trace.warnings) == 1


def test_merged_ranks_survive_the_cache_and_refuse_cross_rank_analysis(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    path = write_trace(tmp_path / "merged.json", merged([0, 1, 2]))
    first, again = load_trace(path), load_trace(path)
    assert first.ranks == again.ranks == [0, 1, 2] and len(again.events) == 18
    run_main("ranks", path).assert_refused(path, "3 ranks merged into one file")
    run_main("summary", "--json", path).assert_clean(json_out=True, codes=(0,))


@FAST
@given(ranks=st.lists(st.one_of(st.integers(0, 2**31 - 1), st.sampled_from(["1", "x", 1.5])), min_size=2, max_size=4))
def test_events_carrying_different_arg_ranks(tmp_path_factory, ranks):
    events = [STEP, *(event(name=f"op{i}", ts=1_100 + i, args={"rank": r}) for i, r in enumerate(ranks))]
    path = write_trace(tmp_path_factory.mktemp("ar") / "t.json", events)
    if len({str(r) for r in ranks}) == 1:
        assert len(load_trace(path, use_cache=False).events) == len(ranks) + 1
    else:
        with pytest.raises(TraceError, match="different args.rank values"):
            load_trace(path, use_cache=False)


def test_arg_ranks_beside_trace_fusion_pids_are_split(tmp_path):
    events = [dict(e, args={**e["args"], "rank": e["pid"] // 100_000_000}) for e in merged([0, 1])]
    trace = load_trace(write_trace(tmp_path / "t.json", events), use_cache=False)
    assert trace.ranks == [0, 1]


# --- size and depth -----------------------------------------------------------------------------

def test_a_million_tiny_events(tmp_path):
    path = tmp_path / "big.json.gz"
    body = ",".join(f'{{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":{i},"dur":1}}' for i in range(1_000_000))
    path.write_bytes(gzip.compress(('{"traceEvents":[' + body + "]}").encode(), compresslevel=1))
    out = run_cli("summary", "--json", "--no-cache", path, budget=Budget(mem_mb=1536, wall_s=90))
    out.assert_clean(json_out=True, codes=(0,))
    assert out.json()["events"]["total"] == 1_000_000


def test_twenty_thousand_events_each_inside_the_previous(tmp_path):
    path = write_trace(tmp_path / "deep.json", [event(name=f"n{i % 7}", ts=1_000 + i, dur=100_000 - 2 * i)
                                                for i in range(20_000)])
    out = run_cli("hotspots", path, "--no-cache", "--collapsed", tmp_path / "stacks.txt",
                  budget=Budget(mem_mb=1536, wall_s=90))
    out.assert_clean(codes=(0,))
    lines = (tmp_path / "stacks.txt").read_text().splitlines()
    assert len(lines) == 1_001 and max(line.count(";") for line in lines) == 1_000
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == 100_000  # self times add up to the root's span
