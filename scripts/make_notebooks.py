"""Generate the investigation notebooks in notebooks/ from the Python source below.

    .venv/bin/python scripts/make_notebooks.py            # (re)write notebooks/*.ipynb
    .venv/bin/python scripts/make_notebooks.py --check    # exit 1 if a notebook is stale

The notebooks are build outputs of this file: edit here, regenerate, commit both. They are
written with nbformat v4, kernelspec python3, deterministic cell ids and no outputs, so a
diff shows only source changes. Each has one cell tagged ``parameters`` (papermill) and only
calls into perfkit: every number shown comes from a tested perfkit function, every figure from
``perfkit.report.plots``, every table through ``perfkit.results.html_table`` (escaped).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "notebooks"
NBFORMAT_MINOR = 5

# -- cell helpers ------------------------------------------------------------------------------


def md(text: str) -> tuple[str, str]:
    return ("markdown", text.strip("\n"))


def code(text: str) -> tuple[str, str]:
    return ("code", text.strip("\n"))


def params(text: str) -> tuple[str, str]:
    return ("parameters", text.strip("\n"))


SETUP = code('''
%matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import headline, plots
from perfkit.results import findings_frame, html_table, html_warnings
''')

ENVIRONMENT = [
    md("## Environment\n\nWhat this kernel runs on: versions, devices, CPU and the environment variables that "
       "change PyTorch performance. Numbers measured live are only comparable on a like environment."),
    code('''
env = perfkit.environment_report()
display(HTML(html_table(env.to_frame(), max_rows=60)))
display(HTML(html_table(findings_frame(env.findings))))
'''),
]

LOG_INTRO = md("## Performance log\n\nThe headline numbers of this run are appended to the dated performance "
               "log (`perf_log_path`) with `change` as the description, so the next run can be compared "
               "against this one. The verdict column compares each metric with its previous value.")

LOG_COLUMNS = '["investigation", "change", "metric", "value", "unit", "baseline", "delta_pct", "verdict"]'


def log_cells(investigation: str, rows_expr: str) -> list:
    return [LOG_INTRO, code(f'''
rows = {rows_expr}
logged = headline.log_headline(perf_log_path, rows)
display(HTML(html_table(logged[{LOG_COLUMNS}])))
display(plots.perf_log_trend(perfkit.PerfLog(perf_log_path).read(), "{investigation}"))
''')]


def interactive_cell(path_expr: str = "headline.find_trace(trace_path)") -> list:
    return [md("## Explore\n\nWith `interactive=True` (JupyterLab), a widget lets you pick any trace under "
               "`data/traces`, a step, and filter ops by name. Batch and HTML runs leave it off."),
            code(f'''
if interactive:
    from perfkit.report.widgets import explorer

    display(explorer(trace_path={path_expr}))
''')]


def trace_summary_cells() -> list:
    return [code('''
summary = perfkit.summarize(trace)
display(HTML(html_table(headline.summary_frame(summary), max_rows=40)))
display(HTML(html_warnings(trace.warnings)))
''')]


def findings_cells(expr: str, what: str = "the analysis") -> list:
    return [md(f"## Findings\n\nRanked findings of {what}, most severe first, each with the evidence, the "
               "recommended fix and the threshold that fired. Measurement-quality warnings follow."),
            code(f'''
display(HTML(html_table(findings_frame({expr}.findings))))
display(HTML(html_warnings({expr}.warnings)))
''')]


# -- notebooks ---------------------------------------------------------------------------------


def cpu_bound() -> list:
    return [
        md('''
# Is the step CPU-bound?

Splits each profiler step's wall time into GPU busy time and what the host did: DataLoader,
blocking syncs and other host work (op dispatch, kernel launches, Python). The verdict is one of
GPU-bound, CPU-launch-bound, input-bound or sync-bound (`perfkit.cpu_bound`, thresholds in
`perfkit/analysis/cpu_bound.py`).

Two modes: `mode="trace"` analyzes `trace_path` (default: a PPO trace shipped in
`data/traces/cpu`); `mode="live"` records `steps` profiled steps of a reference workload
(`workload`, `variant`, `overrides`) on `device` ("auto": CUDA when present, else CPU) first.
'''),
        params('''
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
trace_path = "data/traces/cpu/ppo_item_logging.json.gz"
workload = "ppo"  # live mode: mppi, ppo, replay or leaky
variant = "item_logging"  # live mode: a variant of the workload (see its variants())
device = "auto"  # live mode: "auto", "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"envs": 8}
top = 15  # rows in op tables and bars in breakdowns
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = "reports/perf_log.csv"
change = "baseline"  # what changed since the last run (goes into the perf log)
run_label = ""
'''),
        SETUP,
        *ENVIRONMENT,
        md("## Trace\n\nThe trace analyzed below and its whole-file counts (times in microseconds)."),
        code('''
trace = headline.load_or_record(mode, trace_path, workload=workload, variant=variant, device=device,
                                steps=steps, warmup=warmup, overrides=overrides)
trace
'''),
        *trace_summary_cells(),
        md("## Verdict\n\nPer-step split of wall time (microseconds) and the overall verdict, read back below."),
        code('''
result = perfkit.cpu_bound(trace)
display(HTML(headline.prose(headline.cpu_bound_text(result))))
display(HTML(html_table(result.to_frame())))
display(plots.step_breakdown(result))
'''),
        md("## Timeline\n\nThe first step: host ops on thread lanes, kernels and copies on stream lanes. "
           "Gaps on the GPU lanes while the host lanes are busy are the launch-bound signature."),
        code("display(plots.step_timeline(trace))"),
        md("## Host ops\n\nWhere host time goes, by self time (time in the op itself, children excluded)."),
        code('''
display(plots.breakdown(result.top_ops(top), value="self_us", top=top, title="Top host ops by self time"))
display(HTML(html_table(result.top_ops(top))))
display(HTML(html_table(result.annotations)))
'''),
        *findings_cells("result"),
        *interactive_cell(),
        *log_cells("cpu_bound", "headline.cpu_bound_rows(result, change=change, run_id=run_label, "
                   "device=headline.trace_device(trace))"),
    ]


LIVE_PARAMS = '''
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"batch": 4}
'''

LOG_PARAMS = '''
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = "reports/perf_log.csv"
change = "baseline"  # what changed since the last run (goes into the perf log)
run_label = ""
'''

LOAD_TRACE = code('''
trace = headline.load_or_record(mode, trace_path, workload=workload, variant=variant, device=device,
                                steps=steps, warmup=warmup, overrides=overrides)
trace
''')


def htod() -> list:
    return [
        md('''
# Host-to-device copies

Which host<->device copies a step makes, from pageable or pinned memory, who issued them, and
whether the host blocked after them (`perfkit.htod`); then this machine's copy bandwidth per size
and mode: pageable, pinned, pinned + `non_blocking` (`perfkit.htod_sweep`).

`mode="trace"` analyzes `trace_path` (default: the replay pipeline with host-side normalization,
shipped in `data/traces/cpu`; CPU traces have no GPU copies, and the figures say so).
`mode="live"` records the replay workload first. The bandwidth sweep always measures *this*
machine; without a GPU it reports "no GPU" and only a host memcpy baseline.
'''),
        params('''
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
trace_path = "data/traces/cpu/replay_host_normalize.json.gz"
workload = "replay"  # live mode: mppi, ppo, replay or leaky
variant = "host_normalize"  # live mode: a variant of the workload
''' + LIVE_PARAMS + '''
sweep_sizes = [4096, 65536, 1048576, 16777216]  # bytes per copy in the bandwidth sweep
sweep_repeats = 5  # timed samples per size and mode
''' + LOG_PARAMS),
        SETUP,
        *ENVIRONMENT,
        md("## Trace\n\nThe trace analyzed below and its whole-file counts (times in microseconds)."),
        LOAD_TRACE,
        *trace_summary_cells(),
        md("## Copies in the trace\n\nCopies per direction and host-memory kind (time in us, GB/s), then per "
           "issuing op and source line."),
        code('''
result = perfkit.htod(trace)
display(HTML(html_table(result.to_frame())))
display(plots.copy_kinds(result))
display(HTML(html_table(result.sites)))
'''),
        md("## Bandwidth sweep\n\nGB/s of `dst.copy_(src)` per size and mode on this machine "
           "(1 GB = 1e9 bytes). Pinned memory usually wins for large copies; small copies are latency-bound."),
        code('''
sweep = perfkit.htod_sweep(sizes_bytes=sweep_sizes, repeats=sweep_repeats, device=device)
display(HTML(headline.prose(headline.htod_text(result, sweep))))
display(plots.copy_bandwidth(sweep))
display(HTML(html_table(sweep.to_frame() if sweep.available else sweep.host_frame(), max_rows=60)))
'''),
        md("## Findings\n\nRanked findings of the trace analysis and of the sweep, most severe first, with fixes."),
        code('''
display(HTML(html_table(findings_frame(result.findings + sweep.findings))))
display(HTML(html_warnings(result.warnings + sweep.warnings)))
'''),
        *interactive_cell(),
        *log_cells("htod", "headline.htod_rows(result, summary, sweep, change=change, run_id=run_label, "
                   "device=headline.trace_device(trace))"),
    ]


def sync_points() -> list:
    return [
        md('''
# Sync points

Every point where the host waits for the GPU (`.item()`, `.cpu()`, `nonzero`, blocking copies,
explicit synchronizes), where it comes from and how long it blocks (`perfkit.syncs` on a trace).
In live mode the runtime detector (`perfkit.detect_syncs`) also runs the workload and names the
Python line of each syncing call; without a GPU it treats CPU tensors as device tensors, so it
shows where the code *would* sync on a GPU.

`mode="trace"` analyzes `trace_path` (default: the PPO workload with planted NaN checks);
`mode="live"` records and runs a reference workload on `device`.
'''),
        params('''
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
trace_path = "data/traces/cpu/ppo_sync_checks.json.gz"
workload = "ppo"  # live mode: mppi, ppo, replay or leaky
variant = "sync_checks"  # live mode: a variant of the workload
''' + LIVE_PARAMS + '''
detect_steps = 2  # live mode: steps run under the runtime sync detector
''' + LOG_PARAMS),
        SETUP,
        *ENVIRONMENT,
        md("## Trace\n\nThe trace analyzed below and its whole-file counts (times in microseconds)."),
        LOAD_TRACE,
        *trace_summary_cells(),
        md("## Runtime detector (live mode)\n\nSyncing calls by source line, counted while the workload ran "
           "`detect_steps` steps. In trace mode there is no process to watch: the trace analysis below is all "
           "there is."),
        code('''
detected = None
if mode == "live":
    detected = headline.detect_workload_syncs(workload, variant, device=device, steps=detect_steps,
                                              overrides=overrides)
    display(HTML(html_table(detected.per_step(detect_steps))))
    display(HTML(html_warnings(detected.warnings)))
'''),
        md("## Sync points in the trace\n\nBy kind, then by site (op and source line), ranked by blocked time (us)."),
        code('''
from perfkit import syncs

result = syncs(trace)
display(HTML(headline.prose(headline.sync_text(result, detected, detect_steps))))
display(HTML(html_table(result.by_kind)))
display(plots.breakdown(result.to_frame().assign(site=headline.site_labels(result.to_frame())), name="site",
                        value="count", unit="sync points", top=15, title="Sync sites by count"))
display(HTML(html_table(result.to_frame())))
'''),
        md("## Timeline\n\nThe first step: long host ops with idle GPU lanes after them are syncs draining the queue."),
        code("display(plots.step_timeline(trace))"),
        *findings_cells("result"),
        *interactive_cell(),
        *log_cells("sync_points", "headline.sync_rows(result, change=change, run_id=run_label, "
                   "device=headline.trace_device(trace), detected=detected, detected_steps=detect_steps)"),
    ]


TRACE_PAIR = [
    md("## Trace diff (trace mode)\n\nThe recorded before (`trace_path`) and after (`trace_path_b`) traces, "
       "compared op by op (`perfkit.diff`). In live mode this section is skipped: the harness above measured "
       "the change directly."),
    code('''
comparison = None
if mode == "trace":
    before, after = headline.load_or_record(mode, trace_path), headline.load_or_record(mode, trace_path_b)
    comparison = perfkit.diff(before, after)
    display(HTML(headline.prose(headline.diff_text(comparison))))
    display(HTML(html_table(headline.summary_pair(before, after))))
    display(HTML(html_table(comparison.to_frame())))
    display(plots.diff_breakdown(comparison))
    display(plots.step_timeline(after))
'''),
]


def compile_ab() -> list:
    return [
        md('''
# torch.compile A/B

Is `torch.compile` worth it for this model? Live mode (`mode="live"`) times eager against compiled
steps interleaved, with a confidence interval on the speedup, and reports the compile time, the
number of steps until it pays off, graph breaks and recompiles (`perfkit.compile_ab`) on a small
policy MLP (`batch`, `features`, `hidden`, `layers`).

A trace cannot tell you what compiling *would* do, so `mode="trace"` does the meaningful thing
instead: it diffs two recorded traces (`trace_path` before, `trace_path_b` after a change), e.g. an
eager and a compiled run of your own job. The defaults are the two MPPI planner traces shipped in
`data/traces/cpu` (tensor construction before/after the fix), since no compiled trace is shipped.
'''),
        params('''
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": run the compile A/B now
trace_path = "data/traces/cpu/mppi_float_tensor.json.gz"  # trace mode: before
trace_path_b = "data/traces/cpu/mppi_from_numpy.json.gz"  # trace mode: after
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
backend = "inductor"  # live mode: torch.compile backend ("inductor", "aot_eager", "eager")
compile_mode = "default"  # live mode: torch.compile mode
batch = 64  # live mode: model sizes
features = 32
hidden = 128
layers = 2
ab_steps = 30  # live mode: interleaved A/B rounds
''' + LOG_PARAMS),
        SETUP,
        *ENVIRONMENT,
        md("## Compile A/B (live mode)\n\nEager (A) against compiled (B): every sample, the ratio CI, and "
           "the verdict (faster / slower / no change / insufficient data)."),
        code('''
headline.check_mode(mode)
ab = None
if mode == "live":
    problem = headline.mlp_problem(batch=batch, features=features, hidden=hidden, layers=layers)
    ab = perfkit.compile_ab(problem.make_model(), problem.example_inputs, backend=backend, mode=compile_mode,
                            steps=ab_steps, device=device)
    display(HTML(headline.prose(headline.compile_text(ab))))
    display(HTML(html_table(headline.summary_table(ab.summary()))))
    display(plots.ab_distribution(ab.timing))
    display(HTML(html_table(ab.to_frame())))
'''),
        *TRACE_PAIR,
        md("## Findings\n\nRanked findings, most severe first, with recommended fixes."),
        code('''
shown = ab if ab is not None else comparison
display(HTML(html_table(findings_frame(shown.findings))))
display(HTML(html_warnings(shown.warnings)))
'''),
        *interactive_cell(),
        *log_cells("compile_ab", "headline.compile_rows(ab, change=change, run_id=run_label) if ab is not None "
                   "else headline.diff_rows(\"compile_ab\", comparison, change=change, run_id=run_label)"),
    ]


def amp_regression() -> list:
    return [
        md('''
# Mixed precision: faster, and still correct?

Live mode (`mode="live"`) trains the same small MLP in fp32 and under `torch.autocast` from the same
seed on the same batches, and reports the step-time A/B with a CI, the divergence of the two loss
curves, the activation memory saved for backward, and the fused-optimizer alternative
(`perfkit.amp_ab`). On CPU autocast uses bfloat16 and is rarely faster; the verdict says so.

`mode="trace"` diffs two recorded traces instead (`trace_path` before, `trace_path_b` after, e.g. an
fp32 and an AMP run of your job); the defaults are the PPO traces shipped in `data/traces/cpu`
(per-step `.item()` logging before, batched metrics after), since no AMP trace is shipped.
'''),
        params('''
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": run the AMP A/B now
trace_path = "data/traces/cpu/ppo_item_logging.json.gz"  # trace mode: before
trace_path_b = "data/traces/cpu/ppo_batched_metrics.json.gz"  # trace mode: after
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
dtype = "bfloat16"  # live mode: autocast dtype ("bfloat16"; "float16" needs CUDA)
optimizer = "adam"  # live mode: adam, adamw or sgd
batch = 64  # live mode: model sizes
features = 32
hidden = 128
layers = 2
train_steps = 10  # live mode: steps of each loss curve
ab_repeats = 20  # live mode: interleaved A/B rounds
''' + LOG_PARAMS),
        SETUP,
        *ENVIRONMENT,
        md("## AMP A/B (live mode)\n\nfp32 (A) against autocast (B): step-time samples and ratio CI, then the "
           "two loss curves."),
        code('''
headline.check_mode(mode)
ab = None
if mode == "live":
    problem = headline.mlp_problem(batch=batch, features=features, hidden=hidden, layers=layers)
    ab = perfkit.amp_ab(problem.make_model, problem.make_batch, problem.loss_fn, steps=train_steps, device=device,
                        dtype=dtype, optimizer=optimizer, repeats=ab_repeats)
    display(HTML(headline.prose(headline.amp_text(ab))))
    display(HTML(html_table(headline.summary_table(ab.summary()))))
    display(plots.ab_distribution(ab.timing))
    display(plots.loss_curves(ab))
'''),
        *TRACE_PAIR,
        md("## Findings\n\nRanked findings, most severe first, with recommended fixes."),
        code('''
shown = ab if ab is not None else comparison
display(HTML(html_table(findings_frame(shown.findings))))
display(HTML(html_warnings(shown.warnings)))
'''),
        *interactive_cell(),
        *log_cells("amp_regression", "headline.amp_rows(ab, change=change, run_id=run_label) if ab is not None "
                   "else headline.diff_rows(\"amp_regression\", comparison, change=change, run_id=run_label)"),
    ]


def memory_leak() -> list:
    return [
        md('''
# Memory leak hunt

Does memory grow with steps? Live mode (`mode="live"`) runs a training step many times and samples
process RSS, Python heap (tracemalloc), gc-tracked objects and CUDA memory; each series gets a
least-squares growth per 1,000 steps with a CI, and the verdict is leak / no leak / inconclusive
(`perfkit.hunt_leak`), with the growing object types and allocation lines. A system monitor
records CPU and (with NVML) GPU use meanwhile. Default: the leaky trainer keeping its loss
tensors (`variant="keep_graph_losses"`).

A profiler trace holds a few steps, too few to see growth, so `mode="trace"` diffs the trace of a
leaky loop (`trace_path`) against the fixed one (`trace_path_b`): the extra per-step work of the
leak (copies, clones, appends) shows up op by op.
'''),
        params('''
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": hunt the leak now
trace_path = "data/traces/cpu/leaky_accumulating_callback.json.gz"  # trace mode: the leaky loop
trace_path_b = "data/traces/cpu/leaky_clean.json.gz"  # trace mode: the fixed loop
workload = "leaky"  # live mode: the workload whose step() is repeated
variant = "keep_graph_losses"  # live mode: keep_graph_losses, unbounded_history, accumulating_callback, clean
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
overrides = {}  # live mode: workload config fields
leak_steps = 300  # live mode: measured steps
leak_warmup = 30  # live mode: steps before measuring
sample_every = 10  # live mode: steps between samples
monitor_interval_s = 0.1  # live mode: system monitor sampling interval
''' + LOG_PARAMS),
        SETUP,
        *ENVIRONMENT,
        md("## Leak hunt (live mode)\n\nGrowth per 1,000 steps of each series with its CI and threshold, the "
           "samples with the fitted line, then the object types and allocation lines that grew."),
        code('''
headline.check_mode(mode)
hunt = None
if mode == "live":
    with headline.live_workload(workload, variant, device, overrides) as trainer:
        with perfkit.SystemMonitor(interval_s=monitor_interval_s) as monitor:
            hunt = perfkit.hunt_leak(trainer.step, steps=leak_steps, warmup=leak_warmup,
                                     sample_every=sample_every, device=device)
    display(HTML(headline.prose(headline.leak_text(hunt))))
    display(HTML(html_table(hunt.growth_frame())))
    display(plots.memory_growth(hunt))
    display(HTML(html_table(hunt.types_frame())))
    display(HTML(html_table(hunt.lines_frame())))
    display(plots.monitor_timeline(monitor.result()))
    display(HTML(html_table(monitor.result().summary())))
'''),
        *TRACE_PAIR,
        md("## Findings\n\nRanked findings, most severe first, with recommended fixes."),
        code('''
shown = hunt if hunt is not None else comparison
display(HTML(html_table(findings_frame(shown.findings))))
display(HTML(html_warnings(shown.warnings)))
'''),
        *interactive_cell(),
        *log_cells("memory_leak", "headline.leak_rows(hunt, change=change, run_id=run_label) if hunt is not None "
                   "else headline.diff_rows(\"memory_leak\", comparison, change=change, run_id=run_label)"),
    ]


def validation() -> list:
    return [
        md('''
# Does perfkit see what this machine does?

Runs the reference workloads, each pathology and its fix, through the harness or detector that must
tell them apart, and checks each figure against what the workload must show (`perfkit.validate`):
pinned vs pageable copy bandwidth, the per-step `.item()` syncs of the PPO workload found at run time
and confirmed in a GPU trace (and only the metrics reads after the fix), `from_numpy` vs
`FloatTensor`, compile A/B break-even without false graph breaks, bf16 vs fp32, GradScaler syncs,
and the leaky trainer's memory slope.

Each row is pass or fail against its expectation, "skipped" where the figure needs a GPU this
machine lacks (the row says why), or "measured" where the device has no fixed expectation.
`preset="auto"` uses GPU-filling sizes on CUDA and a quick pass on a CPU.
'''),
        params('''
device = "auto"  # "auto" (CUDA when present, else CPU), "cpu" or "cuda"
preset = "auto"  # "auto" (full on CUDA, quick on CPU), "full" or "quick"
only = None  # a list of check names to run, or None for all
perf_log_path = "reports/perf_log.csv"
change = "baseline"  # what changed since the last run (goes into the perf log)
run_label = ""
'''),
        SETUP,
        *ENVIRONMENT,
        md("## Checks\n\nOne row per check: status, what perfkit measured, what the workload must show, and "
           "the claim. The call that produced each figure follows the table."),
        code('''
report = perfkit.validate(device, preset=preset, only=only)
display(HTML(headline.prose(headline.validation_text(report))))
display(HTML(html_table(report.to_frame()[["check", "status", "measured", "expected", "claim"]], max_rows=50)))
display(HTML(html_table(report.to_frame()[["check", "command"]], max_rows=50)))
'''),
        *log_cells("validation", "headline.validation_rows(report, change=change, run_id=run_label)"),
    ]


NOTEBOOKS = {
    "cpu_bound": cpu_bound,
    "htod": htod,
    "sync_points": sync_points,
    "compile_ab": compile_ab,
    "amp_regression": amp_regression,
    "memory_leak": memory_leak,
    "validation": validation,
}

# -- writing -----------------------------------------------------------------------------------


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` as an nbformat v4 node (deterministic: same source, same JSON)."""
    nb = nbformat.v4.new_notebook()
    nb.nbformat_minor = NBFORMAT_MINOR
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    nb.cells = [_cell(name, i, kind, text) for i, (kind, text) in enumerate(NOTEBOOKS[name]())]
    return nb


def _cell(name: str, index: int, kind: str, text: str):
    if kind == "markdown":
        cell = nbformat.v4.new_markdown_cell(text)
    else:
        cell = nbformat.v4.new_code_cell(text)
        if kind == "parameters":
            cell.metadata["tags"] = ["parameters"]
    cell.id = f"{name.replace('_', '-')}-{index:02d}"
    return cell


def render(name: str) -> str:
    nb = build(name)
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def write_all(out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in NOTEBOOKS:
        path = out / f"{name}.ipynb"
        path.write_text(render(name), encoding="utf-8")
        written.append(path)
    return written


def stale(out: Path = OUT) -> list[str]:
    """Names whose notebook file is missing or differs from what this script generates."""
    return [n for n in NOTEBOOKS
            if not (out / f"{n}.ipynb").is_file() or (out / f"{n}.ipynb").read_text(encoding="utf-8") != render(n)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a notebook differs from its source here")
    p.add_argument("--out", type=Path, default=OUT, help="output folder (default notebooks/)")
    args = p.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        for name in bad:
            print(f"{args.out / name}.ipynb is stale: run scripts/make_notebooks.py", file=sys.stderr)
        return 1 if bad else 0
    for path in write_all(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
