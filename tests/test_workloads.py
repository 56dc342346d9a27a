"""Reference workloads (mppi, ppo, replay), the registry, trace recording and the committed traces."""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfkit.errors import ParameterError, PerfkitError  # noqa: E402
from perfkit.workloads import mppi, ppo, replay  # noqa: E402
from perfkit.workloads.base import WorkloadRun  # noqa: E402
from perfkit.workloads.record import record_trace, trace_event_counts  # noqa: E402
from perfkit.workloads.registry import (  # noqa: E402
    WORKLOADS, available_workloads, make_workload, workload_variants,
)

ROOT = Path(__file__).resolve().parents[1]
CPU_TRACES = ROOT / "data" / "traces" / "cpu"
OWN = ("mppi", "ppo", "replay")
CASES = [(name, variant) for name in OWN for variant in workload_variants(name)]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny ops on 2 shared cores are dominated by intra-op thread wake-ups; one thread
    keeps the tests fast and the timing comparison stable."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- every variant runs -------------------------------------------------------------------

@pytest.mark.parametrize("name,variant", CASES)
def test_variant_runs_and_returns_a_run_record(name, variant):
    with make_workload(name, device="cpu", variant=variant) as w:
        run = w.run(3)
    assert isinstance(run, WorkloadRun)
    assert run.workload == name and run.device == "cpu" and run.steps == 3
    assert all(s > 0 for s in run.step_s)
    frame = run.to_frame()
    assert list(frame["step"]) == [0, 1, 2] and (frame["step_ms"] > 0).all()
    assert name in repr(run) and "<table" in run._repr_html_()
    with pytest.raises(PerfkitError, match="closed"):
        w.step()


def test_each_workload_has_a_pathology_and_a_fix():
    assert set(workload_variants("mppi")) == {"float_tensor", "from_numpy"}
    assert set(workload_variants("ppo")) == {"item_logging", "sync_checks", "batched_metrics", "tensor_branch",
                                             "flag_flip", "compiled"}
    assert set(workload_variants("replay")) == {"host_normalize", "device_normalize"}


def test_run_warns_when_too_few_steps_for_a_steady_median():
    run = mppi.make(device="cpu").run(1)
    assert run.warnings and "at least 3 steps" in run.warnings[0]
    assert "perfkit-warnings" in run._repr_html_()
    assert mppi.make(device="cpu").run(3).warnings == ()


def test_run_uses_the_injected_clock():
    ticks = iter([0.0, 0.5, 1.0, 3.0])
    run = replay.make(device="cpu").run(2, clock=lambda: next(ticks))
    assert run.step_s == (0.5, 2.0)


# --- documented metrics ---------------------------------------------------------------------

def test_mppi_metrics_only_when_logging_each_step():
    assert mppi.make(device="cpu").step() == {}
    w = mppi.make(device="cpu", log_every_step=True)
    metrics = w.step()
    assert set(metrics) == {"value", "action_std"}
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    assert w.last_action.shape == (mppi.Config().action_dim,)
    assert (abs(w.last_action) <= 1.0).all()


def test_mppi_is_deterministic_for_a_seed():
    a, b = (mppi.make(mppi.variants()["float_tensor"], device="cpu") for _ in range(2))
    a.run(3), b.run(3)
    assert (a.last_action == b.last_action).all()


def test_mppi_pathology_and_fix_plan_the_same_action():
    pathology = mppi.make(mppi.variants()["float_tensor"], device="cpu")
    fix = mppi.make(mppi.variants()["from_numpy"], device="cpu")
    pathology.run(3), fix.run(3)
    assert abs(pathology.last_action - fix.last_action).max() < 1e-4


def test_ppo_item_logging_reports_every_step_batched_every_k():
    item = ppo.make(ppo.variants()["item_logging"], device="cpu")
    for _ in range(2):
        metrics = item.step()
        assert set(metrics) == set(ppo.METRICS)
        assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    batched = ppo.make(ppo.variants()["batched_metrics"], device="cpu", metrics_every=2)
    assert batched.step() == {}
    metrics = batched.step()
    assert set(metrics) == set(ppo.METRICS)
    assert -0.01 <= metrics["reward"] <= 1.0
    assert 0.0 < metrics["entropy"] <= math.log(4) + 1e-6


def test_replay_metrics_bytes_and_pin_note_on_cpu():
    assert replay.make(device="cpu").step() == {}
    metrics = replay.make(device="cpu", log_every_step=True).step()
    assert set(metrics) == {"loss"} and math.isfinite(metrics["loss"])
    host = replay.make(replay.variants()["host_normalize"], device="cpu")
    dev = replay.make(replay.variants()["device_normalize"], device="cpu")
    assert host.bytes_per_batch == 4 * dev.bytes_per_batch
    assert host.notes == []
    assert len(dev.notes) == 1 and "pin_memory=True skipped" in dev.notes[0]
    assert dev.run(2).notes == tuple(dev.notes)
    cat = replay.make(device="cpu", stack="cat", pin_memory=True)
    assert "no staging buffer to pin" in cat.notes[0]


@pytest.mark.parametrize("stack", ["cat", "preallocated"])
def test_replay_batches_match_across_pipelines(stack):
    """Host and device normalization, stacked or gathered, feed the encoder the same pixels."""
    losses = {
        norm: replay.make(device="cpu", stack=stack, normalize_on=norm, log_every_step=True).step()["loss"]
        for norm in ("host", "device")
    }
    assert losses["host"] == pytest.approx(losses["device"], rel=1e-5)


@pytest.mark.parametrize("variant", ["host_normalize", "device_normalize"])
def test_replay_trace_shows_the_sample_and_update_annotations_once_per_step(tmp_path, variant):
    from perfkit.analysis.step.cpu_bound import cpu_bound
    from perfkit.trace import load_trace

    path = record_trace(make_workload("replay", device="cpu", variant=variant), tmp_path / "r.json.gz",
                        steps=3, warmup=1, with_stack=False)
    trace = load_trace(path)
    table = cpu_bound(trace).annotations.set_index("name")
    assert table.loc[replay.SAMPLE_ANNOTATION, "count"] == 3
    assert table.loc[replay.UPDATE_ANNOTATION, "count"] == 3
    ev = trace.events
    marks = ev[(ev["cat"] == "user_annotation") & (ev["name"] == replay.SAMPLE_ANNOTATION)]
    ops = ev[(ev["cat"] == "cpu_op") & ev["name"].isin(["aten::index_select", "aten::stack"])]
    # the gather of every step lies inside that step's sample range
    inside = [((marks["ts_us"] <= t) & (t + d <= marks["ts_us"] + marks["dur_us"])).any()
              for t, d in zip(ops["ts_us"], ops["dur_us"])]
    assert ops.shape[0] >= 3 and all(inside)


# --- the pathologies are real ----------------------------------------------------------------

def test_mppi_float_tensor_path_builds_the_batch_per_sample(monkeypatch):
    calls = []
    real = torch.FloatTensor

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(torch, "FloatTensor", counting)
    mppi.make(mppi.variants()["from_numpy"], device="cpu").run(2)
    assert calls == []
    mppi.make(mppi.variants()["float_tensor"], device="cpu", samples=16).run(2)
    assert len(calls) == 2 * 16


def test_mppi_from_numpy_is_not_slower_than_float_tensor():
    workloads = {name: mppi.make(cfg, device="cpu") for name, cfg in mppi.variants().items()}
    for w in workloads.values():
        w.run(3)
    times = {name: [] for name in workloads}
    for _ in range(15):  # interleaved so drift on a shared machine hits both
        for name, w in workloads.items():
            start = time.perf_counter()
            w.step()
            times[name].append(time.perf_counter() - start)
    fix, pathology = (statistics.median(times[n]) for n in ("from_numpy", "float_tensor"))
    assert fix <= 1.5 * pathology, f"from_numpy {fix * 1e3:.2f} ms vs float_tensor {pathology * 1e3:.2f} ms"


def _count_items_from(module_file: str, monkeypatch) -> list:
    calls = []
    real = torch.Tensor.item

    def counting(self):
        if sys._getframe(1).f_code.co_filename == module_file:
            calls.append(1)
        return real(self)

    monkeypatch.setattr(torch.Tensor, "item", counting)
    return calls


def test_ppo_item_logging_calls_item_every_env_step_and_update(monkeypatch):
    cfg = ppo.variants()["item_logging"]
    updates = cfg.epochs * (cfg.envs * cfg.rollout // cfg.minibatch)
    w = ppo.make(cfg, device="cpu")
    calls = _count_items_from(ppo.__file__, monkeypatch)
    w.step()
    assert len(calls) == cfg.rollout + 2 * updates
    w.step()
    assert len(calls) == 2 * (cfg.rollout + 2 * updates)


def test_ppo_batched_metrics_never_calls_item(monkeypatch):
    w = ppo.make(ppo.variants()["batched_metrics"], device="cpu", metrics_every=2)
    calls = _count_items_from(ppo.__file__, monkeypatch)
    w.run(2)
    assert calls == []


def test_ppo_sync_checks_variant_branches_on_tensors_in_every_forward(monkeypatch):
    cfg = ppo.variants()["sync_checks"]
    forwards = cfg.rollout + 1 + cfg.epochs * (cfg.envs * cfg.rollout // cfg.minibatch)
    calls, real = [], torch.Tensor.__bool__

    def counting(self):
        if sys._getframe(1).f_code.co_filename == ppo.__file__:
            calls.append(1)
        return real(self)

    w = ppo.make(cfg, device="cpu")
    monkeypatch.setattr(torch.Tensor, "__bool__", counting)
    w.step()
    assert len(calls) == forwards * (cfg.nan_checks + 1)  # planted checks + the hot branch
    calls.clear()
    ppo.make(ppo.variants()["batched_metrics"], device="cpu").step()
    assert calls == []


def test_ppo_nan_checks_fire_at_the_first_site():
    w = ppo.make(device="cpu", nan_checks=1)
    with torch.no_grad():
        w._model.conv1.bias.fill_(float("nan"))
    with pytest.raises(PerfkitError, match="NaN at conv1"):
        w.step()


def _compiled_graphs(**overrides) -> int:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    small = {"rollout": 2, "epochs": 1, "minibatch": 16}
    ppo.make(device="cpu", compile=True, compile_backend="eager", **small, **overrides).step()
    return counters["stats"]["unique_graphs"]


def test_ppo_hot_branch_breaks_the_compiled_graph():
    clean, broken = _compiled_graphs(hot_branch=False), _compiled_graphs(hot_branch=True)
    assert clean >= 1
    assert broken > clean


def test_ppo_flag_flip_recompiles_and_reports_the_recorded_statistic():
    clean, flipped = _compiled_graphs(stats_flag=False), _compiled_graphs(stats_flag=True)
    assert flipped > clean  # a second graph for record_stats=True
    metrics = ppo.make(device="cpu", stats_flag=True, metrics_every=1).step()
    assert metrics["hidden_absmax"] > 0 and set(metrics) == {*ppo.METRICS, "hidden_absmax"}
    assert "hidden_absmax" not in ppo.make(device="cpu", metrics_every=1).step()


def _source_line(module, text: str) -> int:
    lines = Path(module.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text))


@pytest.mark.parametrize("variant, kind, reason, code", [
    ("tensor_branch", "graph_break", "Data-dependent branching", "if (h.abs() > 6).any():"),
    ("flag_flip", "recompile", "record_stats == False", "if record_stats:"),
])
def test_ppo_compile_variants_show_reason_and_line_through_compile_ab(variant, kind, reason, code):
    from perfkit.bench.compile_ab import compile_ab

    with make_workload("ppo", device="cpu", variant=variant) as w:
        result = compile_ab(**w.compile_inputs(), backend="eager", steps=5, warmup=1, min_time_s=0.01)
    rows = result.to_frame()
    assert rows[["kind", "reason"]].values.tolist() == [[kind, reason]]
    assert rows["location"].iloc[0] == f"{ppo.__file__}:{_source_line(ppo, code)}"
    site = (result.graph_breaks or result.recompiles)[0]
    assert site.code.startswith(code)
    with make_workload("ppo", device="cpu", variant="compiled") as w:
        clean = compile_ab(**w.compile_inputs(), backend="eager", steps=5, warmup=1, min_time_s=0.01)
    assert clean.graph_break_count == 0 and clean.recompile_count == 0


def test_mppi_compiled_rollout_matches_eager():
    torch._dynamo.reset()
    eager = mppi.make(device="cpu", preallocate=False)
    compiled = mppi.make(device="cpu", preallocate=False, compile=True, compile_backend="eager")
    eager.run(2), compiled.run(2)
    assert abs(eager.last_action - compiled.last_action).max() < 1e-5


def test_ppo_amp_and_fused_adam_train_on_cpu():
    metrics = ppo.make(device="cpu", amp=True, fused_adam=True, metrics_every=1).step()
    assert all(math.isfinite(v) for v in metrics.values())


# --- registry and config validation ---------------------------------------------------------

def test_registry_lists_all_workloads_lazily():
    assert set(WORKLOADS) == {"mppi", "ppo", "replay", "leaky"}
    assert set(OWN) <= set(available_workloads())
    code = "import sys, perfkit.workloads.registry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_registry_rejects_unknown_workload_naming_valid_ones():
    with pytest.raises(ParameterError) as err:
        make_workload("dreamer", device="cpu")
    assert "dreamer" in str(err.value)
    assert all(name in str(err.value) for name in WORKLOADS)


@pytest.mark.parametrize("name", OWN)
def test_registry_rejects_unknown_config_fields_naming_valid_ones(name):
    with pytest.raises(ParameterError) as err:
        make_workload(name, device="cpu", bogus_field=3)
    assert "bogus_field" in str(err.value) and "seed" in str(err.value)


def test_registry_rejects_unknown_variant():
    with pytest.raises(ParameterError, match="float_tensor, from_numpy"):
        make_workload("mppi", device="cpu", variant="nope")


def test_registry_overrides_apply_on_top_of_a_variant():
    w = make_workload("ppo", device="cpu", variant="item_logging", envs=4, minibatch=16)
    assert w.config.log_every_step_item and w.config.envs == 4 and w.config.fused_adam


@pytest.mark.parametrize("module,field,value", [
    (mppi, "tensor_ctor", "float64"), (mppi, "elites", 1000), (mppi, "samples", 0),
    (ppo, "nan_checks", 7), (ppo, "minibatch", 10_000), (ppo, "amp", "yes"),
    (replay, "normalize_on", "gpu"), (replay, "stack", "list"), (replay, "seq_len", 1),
])
def test_bad_config_values_raise_parameter_error(module, field, value):
    with pytest.raises(ParameterError, match=field):
        module.make(device="cpu", **{field: value})


def test_make_rejects_a_config_of_another_workload():
    with pytest.raises(ParameterError, match="expected"):
        mppi.make(ppo.Config(), device="cpu")


def test_leaky_is_reachable_through_the_registry():
    if "leaky" not in available_workloads():
        pytest.skip("perfkit/workloads/leaky.py not in this checkout")
    variants = workload_variants("leaky")
    assert variants
    w = make_workload("leaky", device="cpu", variant=next(iter(variants)))
    assert w.name == "leaky"


# --- record_trace -----------------------------------------------------------------------------

def _load(path: Path) -> dict:
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())


def test_record_trace_writes_gzipped_chrome_trace_with_steps_and_stacks(tmp_path):
    w = replay.make(device="cpu")
    path = record_trace(w, tmp_path / "replay.json.gz", steps=2, warmup=1)
    assert path == tmp_path / "replay.json.gz"
    trace = _load(path)
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names
    assert any(e.get("cat") == "python_function" for e in trace["traceEvents"])
    meta = trace["perfkit_workload"]
    assert meta["name"] == "replay" and meta["config"]["stack"] == "preallocated"
    counts = trace_event_counts(path)
    assert counts["profiler_steps"] == 2 and counts["python_function"] > 0 and counts["cpu_op"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.json.gz"]  # no temp files left


def test_record_trace_without_stack_has_no_python_events(tmp_path):
    path = record_trace(mppi.make(device="cpu"), tmp_path / "m.json.gz", steps=1, with_stack=False)
    counts = trace_event_counts(path)
    assert counts["python_function"] == 0 and counts["profiler_steps"] == 1


@pytest.mark.parametrize("bad", ["trace.json", "trace.gz", "missing_dir/t.json.gz"])
def test_record_trace_rejects_bad_paths(tmp_path, bad):
    with pytest.raises(ParameterError):
        record_trace(mppi.make(device="cpu"), tmp_path / bad)


def test_trace_event_counts_rejects_non_traces(tmp_path):
    bad = tmp_path / "x.json.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b'{"nope": 1}')
    with pytest.raises(PerfkitError, match="traceEvents"):
        trace_event_counts(bad)


# --- the record script and the committed traces ----------------------------------------------

def _script():
    spec = importlib.util.spec_from_file_location("record_traces", ROOT / "scripts" / "record_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_record_script_writes_traces_and_manifest(tmp_path):
    script = _script()
    assert script.main(["--out", str(tmp_path), "--only", "replay", "--steps", "1"]) == 0
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    files = {e["file"]: e for e in manifest["files"]}
    assert set(files) == {"replay_host_normalize.json.gz", "replay_device_normalize.json.gz"}
    for name, entry in files.items():
        assert (tmp_path / name).stat().st_size == entry["bytes"]
        assert entry["device"] == "cpu" and entry["events"] > 0
        assert entry["torch_version"] == torch.__version__
    assert "skipped" in files["replay_device_normalize.json.gz"]["notes"][0]


def test_record_script_only_refreshes_the_named_workloads(tmp_path):
    script = _script()
    assert script.main(["--out", str(tmp_path), "--only", "replay", "--steps", "1"]) == 0
    assert script.main(["--out", str(tmp_path), "--only", "mppi", "--steps", "1"]) == 0
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert sorted({e["workload"] for e in manifest["files"]}) == ["mppi", "replay"]
    assert len(list(tmp_path.glob("*.json.gz"))) == 4
    with pytest.raises(ParameterError, match="valid workloads"):
        script.main(["--out", str(tmp_path), "--only", "dreamer"])


def test_record_script_fails_loudly_when_a_trace_is_too_big(tmp_path, capsys):
    script = _script()
    assert script.main(["--out", str(tmp_path), "--only", "mppi", "--steps", "1", "--max-mb", "0.001"]) == 1
    assert "FAILED" in capsys.readouterr().err
    assert not (tmp_path / "MANIFEST.json").exists()


def test_committed_cpu_traces_cover_every_variant_and_stay_small():
    manifest_path = CPU_TRACES / "MANIFEST.json"
    if not manifest_path.exists():
        pytest.skip("data/traces/cpu not generated: run scripts/record_traces.py")
    manifest = json.loads(manifest_path.read_text())
    files = {e["file"]: e for e in manifest["files"]}
    expected = {f"{name}_{variant}.json.gz" for name, variant in CASES}
    assert expected <= set(files)
    total = 0
    for name, entry in files.items():
        size = (CPU_TRACES / name).stat().st_size
        assert size < 2_000_000 and entry["profiler_steps"] >= 1
        total += size
    assert total < 6_000_000


def test_ppo_nonzero_reset_is_the_same_math_with_a_sync_per_env_step():
    from perfkit.bench.live import detect_workload_syncs

    small = {"envs": 8, "rollout": 4, "epochs": 1, "minibatch": 16, "metrics_every": 1}
    plain = ppo.make(device="cpu", **small)
    indexed = ppo.make(device="cpu", nonzero_reset=True, **small)
    for _ in range(3):
        assert plain.step() == pytest.approx(indexed.step())
    assert torch.equal(plain._envs.pos, indexed._envs.pos) and torch.equal(plain._envs.t, indexed._envs.t)
    report = detect_workload_syncs("ppo", device="cpu", steps=2, overrides={**small, "nonzero_reset": True})
    rows = report.to_frame()
    where = rows[rows["op"] == "where(cond)"]
    assert where["count"].tolist() == [2 * small["rollout"]]
    assert where["line"].iloc[0] == _source_line(ppo, "idx = torch.where(done)[0]")


def test_mppi_changing_sample_counts_recompile_through_compile_ab():
    from perfkit.bench.compile_ab import compile_ab

    with mppi.make(device="cpu") as w:
        result = compile_ab(**w.compile_inputs(), backend="eager", steps=5, warmup=1, min_time_s=0.01)
    assert result.recompile_count == 1 and result.recompiles[0].on_shape
    assert "size mismatch at index 0" in result.recompiles[0].reason
    assert len(result.variant_call_s) == 2  # the second new count reuses the dynamic graph
    assert "mark_dynamic" in next(f for f in result.findings if "recompile" in f.title).fix
