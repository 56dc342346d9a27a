"""The arguments and help of every ``perfkit`` subcommand, and nothing else: ``perfkit --help`` and
``perfkit NAME --help`` build their parsers from this module alone, so they import no pandas, numpy or
torch. ``add_<name>(subparsers)`` adds the parser of ``perfkit <name>`` (``critical_path``: ``perfkit
critical-path``) and returns it, with ``check_inputs(args)`` as a default where the command reads files
(:mod:`perfkit.cli.paths`: run before the body's imports); its body, ``run(args)`` with the imports it
needs at the top, lives in ``perfkit/cli/<name>.py``, which :func:`perfkit.cli.main` imports only for the
command that runs.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..registry import INVESTIGATIONS, NOTEBOOK_SETS
from ..validation.names import CHECK_NAMES, PRESET_NAMES
from .paths import check_script, check_traces

PROFILE_DESCRIPTION = ("``perfkit profile SCRIPT [ARGS...]`` (or ``-m MODULE [ARGS...]``): run a training script "
                       "unchanged under the\nPyTorch profiler, write the trace into the workbook's traces/ and print "
                       "the diagnosis.")
DETECT_DESCRIPTION = ("``perfkit detect SCRIPT [ARGS...] [--json]``: run a script and list the lines that forced a "
                      "device sync.")
SCAN_DESCRIPTION = "``perfkit scan PATH... [--json] [--rules a,b] [--fail-on-findings]``: static sync-point lint."
MEMORY_DESCRIPTION = ("``perfkit memory TRACE... [--json]``: memory over time per device from a trace recorded with\n"
                      "``profile_memory=True`` (``perfkit profile --memory``): peak and what allocated it, memory "
                      "held at\neach step's end and its growth per step, the top allocating ops.")
# A command named for its investigation (perfkit.registry.INVESTIGATIONS) -> the names it had before, which
# still work: ``perfkit syncs`` runs ``perfkit sync-points``.
ALIASES = {"sync-points": ("syncs",), "trace-diff": ("diff",), "gpu-kernels": ("kernels",)}
VIEWS_HELP = ("views: events (name, cat, ph, ts_us, dur_us, pid, tid, file_id, rank, device, stream, correlation, "
              "external_id, bytes, python_id, python_parent, alloc_bytes), flows (id, ph, cat, pid, tid, ts_us, "
              "file_id), steps (rank, step, start_us, end_us, dur_us, source), ranks (file_id, rank, path, trace_name, "
              "schema_version, base_time_ns, backend, world_size, devices, flags, events_read); times in microseconds")


def _trace(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=".json / .json.gz trace file or tensorboard_trace_handler directory")
    p.set_defaults(check_inputs=check_traces)
    _run(p)


def _run(p: argparse.ArgumentParser) -> None:
    """``--run N``: of a directory holding several runs (not the ranks of one job), the one to read."""
    p.add_argument("--run", type=int, default=None, metavar="N",
                   help="a directory of several runs (files that are not the ranks of one job) is refused with "
                        "the list of its runs; read run N of that list instead (1 = the newest)")


def _trace_command(subparsers, name: str, help: str, *, json_help: str, top: tuple[int, str] | None = None):
    """A command over one trace: the trace argument, ``--json`` and, with ``top=(default, help)``, ``--top``."""
    p = subparsers.add_parser(name, help=help, aliases=ALIASES.get(name, ()))
    _trace(p)
    p.set_defaults(unknown_args_hint=f"perfkit {name} reads one trace (a pattern that matches several gives "
                                     f"several): perfkit {name} \"$(ls -t PATTERN | head -1)\" reads the newest")
    p.add_argument("--json", action="store_true", help=json_help)
    if top:
        p.add_argument("--top", type=int, default=top[0], help=top[1])
    return p


def _markdown(p: argparse.ArgumentParser, *, cache: bool = False) -> None:
    """``--markdown``, ``--budget`` and ``--cursor``: the bounded text ``perfkit mcp``'s tool of the same name gives
    (and, ``cache``, ``--no-cache``)."""
    p.add_argument("--markdown", action="store_true",
                   help="print the answer as markdown within --budget tokens, as `perfkit mcp` replies (for a pull "
                        "request comment or a chat): the one-line answer, ranked tables, where each figure comes from")
    p.add_argument("--budget", type=int, default=4000, metavar="TOKENS",
                   help="with --markdown: the most tokens (characters / 4) to print, 500 to 50,000 (default 4,000)")
    p.add_argument("--cursor", default=None, help="with --markdown: the cursor of a `more:` line, for the next page")
    if cache:
        _no_cache(p)


def _no_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")


def add_profile(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "profile", help="run a training script under the PyTorch profiler and diagnose the trace",
        description=PROFILE_DESCRIPTION)
    p.add_argument("script", help="Python script to run as __main__ (with -m: a module name)")
    p.add_argument("script_args", nargs="*", metavar="ARGS", help="arguments for the script (options after `--`)")
    p.add_argument("-m", dest="module", action="store_true", help="SCRIPT is a module: run it like python -m")
    p.add_argument("--wait", type=int, default=5, help="steps run before profiling (start-up; the last 4 time the unprofiled step; default 5)")
    p.add_argument("--warmup", type=int, default=2, help="profiler warm-up steps, not kept (default 2)")
    p.add_argument("--active", type=int, default=3, help="steps recorded (default 3)")
    p.add_argument("--repeat", type=int, default=1, help="schedule cycles, one trace each (default 1)")
    p.add_argument("--step", default=None, metavar="FUNCTION",
                   help="the function whose calls are the steps (loops without an optimizer): one the script "
                        "defines (plan, Planner.step) or module:function")
    p.add_argument("--seconds", type=float, default=None,
                   help="record a window of this many seconds (at most a week), no steps")
    p.add_argument("--memory", action="store_true", help="profile_memory=True: record [memory] events")
    p.add_argument("--ranks", default=None, metavar="0,1|all",
                   help="record these ranks of the job (default with torchrun: all), each its own process: "
                        "perfkit profile -- torchrun --nproc-per-node 2 train.py; then perfkit ranks on them")
    p.add_argument("--trigger", default=None, metavar="slow:1.5x",
                   help="watch every step after --wait; keep the steps this many times the running median")
    p.add_argument("--keep", type=int, default=3, help="with --trigger: the slowest steps kept (default 3)")
    p.add_argument("--out", default=None, help="folder for the trace (default: the workbook's traces/)")
    p.add_argument("--scan", action="store_true", help="also print `perfkit scan` of the script")
    p.add_argument("--report", action="store_true",
                   help="run the step_anatomy and cpu_bound notebooks on the trace (dated reports, perf log)")
    p.add_argument("--json", action="store_true",
                   help="print {trace, steps_recorded, step_source, step_median_ms, overhead_pct, "
                        "overhead_measurable, diagnosis, warnings, ...}")
    p.set_defaults(unknown_args_hint="perfkit's options go before the script, the script's after "
                                     "`--`: perfkit profile --json train.py -- --epochs 1",
                   check_inputs=check_script)
    return p


def add_diagnose(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "diagnose", "what limits each step, the numbers behind it and the fix, on one screen",
                       json_help="print one JSON object: verdict, steps, evidence, fix, "
                                                       "warm_up, outside_steps, warnings")
    _markdown(p, cache=True)
    return p


def add_summary(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("summary", help="counts, GPU time, copies and syncs of each trace")
    p.add_argument("traces", nargs="+", help=".json / .json.gz trace files or tensorboard_trace_handler directories")
    p.add_argument("--json", action="store_true", help="one JSON object per trace, one per line")
    p.add_argument("--salvage", action="store_true", help="recover the complete events of a file cut off mid-write")
    _run(p)
    _markdown(p, cache=True)
    return p


def add_sync_points(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "sync-points", "where the host waited on the GPU: sync points with the function "
                                            "they ran in, count per step and time blocked",
                       json_help="print the result as one JSON object",
                       top=(20, "sites to list in the table (default 20)"))
    _markdown(p, cache=True)
    return p


def add_trace_diff(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("trace-diff", aliases=ALIASES["trace-diff"],
                              help="compare two traces: step time, GPU idle, ops, kernels, ranges, copies, waits")
    p.add_argument("a", help="baseline trace (file or tensorboard_trace_handler directory)")
    p.add_argument("b", help="candidate trace")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--top", type=int, default=10, help="ops, kernels and ranges to list (default 10)")
    _run(p)
    _markdown(p, cache=True)
    return p


def add_ranks(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ranks", help="per-rank breakdown, stragglers and collective arrival skew of a "
                                            "multi-rank run")
    p.add_argument("traces", nargs="+", help="a tensorboard_trace_handler directory, or one trace file per rank")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local: a process pool on this machine (default); dask: tasks on a dask.distributed cluster")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (tcp://HOST:8786); default $DASK_SCHEDULER_ADDRESS")
    p.add_argument("--workers", type=int, default=None, help="local engine: processes (default: one per core)")
    _run(p)
    _markdown(p, cache=True)
    return p


def add_sql(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sql", help="run a DuckDB SQL query over a trace's events, flows, steps and ranks",
                              description=VIEWS_HELP)
    p.add_argument("query", help="SQL, e.g. \"SELECT name, sum(dur_us) FROM events WHERE cat='kernel' GROUP BY 1\"")
    p.add_argument("traces", nargs="+", help=".json / .json.gz trace files, or one tensorboard_trace_handler directory")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print the result as CSV")
    out.add_argument("--json", action="store_true", help="print the result as JSON, one object per row and line")
    _no_cache(p)
    p.add_argument("--allow-files", action="store_true",
                   help="let the query read and write files (read_csv, COPY ... TO, ATTACH); by default it sees "
                        "the trace's views only, so a pasted query cannot touch this machine's files")
    _markdown(p)
    p.add_argument("--limit", type=int, default=100, metavar="ROWS",
                   help="with --markdown: the rows to answer with, 1 to 1,000 (default 100), as `perfkit mcp`'s sql")
    return p


def add_detect(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "detect", help="run a Python script and report the lines that force a host-device sync",
        description=DETECT_DESCRIPTION)
    p.add_argument("script", help="Python script to run as __main__")
    p.add_argument("script_args", nargs="*", metavar="ARGS",
                   help="arguments for the script (put options after `--`)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {file, line, op, count}")
    p.add_argument("--cpu-as-device", action="store_true",
                   help="count CPU tensors as device tensors (the default without a GPU): where a script whose "
                        "tensors are on the CPU would sync on a GPU")
    p.set_defaults(unknown_args_hint="options of the script go after `--`: "
                                     "perfkit detect SCRIPT [--json] -- --epochs 1")
    return p


def add_scan(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "scan", help="find sync-point patterns (.item() in loops, tensor conditions, ...) in Python source",
        description=SCAN_DESCRIPTION)
    p.add_argument("paths", nargs="+", metavar="PATH", help="Python files or directories")
    p.add_argument("--json", action="store_true", help="print a JSON list of findings")
    p.add_argument("--rules", default=None, help="comma-separated rule ids to run (default: all)")
    p.add_argument("--fail-on-findings", action="store_true", help="exit 1 when anything is found")
    return p


def add_run(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run", help="run investigation notebooks into dated HTML reports",
        description="Execute notebooks with papermill into OUT/YYYY-MM-DD/HHMMSS/<name>.ipynb and .html, then "
                    f"rebuild OUT/index.html. Without names: {', '.join(INVESTIGATIONS)}. 'case_studies' runs "
                    "the worked case studies (" + ", ".join(NOTEBOOK_SETS["case_studies"]) + "). OUT defaults to the "
                    "workbook's reports/ (the folder holding notebooks/ above the working directory, or "
                    "$PERFKIT_HOME, or the working directory).")
    p.add_argument("names", nargs="*", metavar="NAME", help="notebook names, a set name (case_studies) or .py/.ipynb paths")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], dest="parameters",
                   metavar=("KEY", "VALUE"),
                   help="notebook parameter; VALUE is read as int, float, True/False, None, a JSON list or "
                        "object ('{\"envs\": 8}'), else text; relative paths are from this directory")
    p.add_argument("--out", default=None, help="reports folder (default: the workbook's reports/)")
    p.add_argument("--date", default=None, help="report folder date YYYY-MM-DD (default: today)")
    p.add_argument("--notebook-dir", default=None, help="where to find notebooks by name")
    p.add_argument("--kernel", default=None, help="Jupyter kernel (default: python3 of this interpreter)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress lines")
    return p


def add_log(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("log", help="print the performance log",
                              description="Print the perf log: date | investigation | change | "
                                          "metric | before -> after | delta | verdict.")
    p.add_argument("--path", default=None, help="log file (default: the workbook's reports/perf_log.csv)")
    p.add_argument("--investigation", default=None, help="only rows of this investigation")
    p.add_argument("--json", action="store_true", help="all columns as JSON records")
    last = p.add_mutually_exclusive_group()
    last.add_argument("--runs", type=int, default=20,
                      help="show the last N runs (default 20), read from the end of the log")
    last.add_argument("--all", action="store_true", help="show every row (reads the whole log)")
    return p


def add_validate(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("validate", help="check perfkit's figures against reference workloads",
                              description="Check that perfkit reports what this machine does, on reference "
                                          "workloads with a known pathology and fix.")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda or cuda:N")
    p.add_argument("--preset", default="auto", choices=["auto", *PRESET_NAMES],
                   help="problem sizes: full (a few seconds of GPU work per check), quick (a CPU smoke run) "
                        "or auto (default: full on CUDA, else quick)")
    p.add_argument("--only", nargs="+", default=None, metavar="CHECK", help=f"checks to run: {', '.join(CHECK_NAMES)}")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table to this file")
    p.add_argument("--json", action="store_true", help="print the checks as JSON records instead of markdown")
    p.add_argument("--write-peaks", type=Path, default=None, metavar="FILE",
                   help="instead of the checks, measure this GPU's achievable peaks (large bf16/fp16/tf32/fp32 "
                        "GEMMs, a large device copy) and write them to FILE for `perfkit gpu-kernels --peaks FILE`")
    return p


def add_hotspots(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "hotspots", "host time by Python function (self, total, calls, per step), "
                                               "and folded stacks for flame graphs",
                       json_help="print the result as one JSON object")
    p.add_argument("--thread", default="main",
                   help="'main' (the thread launching the most GPU work; default), 'all', or a thread id")
    p.add_argument("--collapsed", metavar="FILE",
                   help="also write folded stacks ('a;b;c 1234', microseconds) for speedscope, inferno, flamegraph.pl")
    p.add_argument("--top", type=int, default=25, help="functions to list in the table (default 25)")
    _markdown(p, cache=True)
    return p


def add_critical_path(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "critical-path", "the chain of host work, launches, kernels, copies and sync "
                                                    "waits that bounds each step, and its time by kind",
                       json_help="print one JSON object: a row per step and totals")
    p.add_argument("--annotation", help="use each instance of this record_function label as a step instead")
    _markdown(p, cache=True)
    return p


def add_whatif(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "whatif", "every fix perfkit gives, replayed on the trace's steps and ranked by the "
                                             "step time it buys; the replay's error per step",
                       json_help="print one JSON object: step_us, replay_error, steps, fixes, all_fixes, verdict")
    p.add_argument("--combine", metavar="FIX,FIX", help="also replay these fixes applied together (a change that "
                                                         "makes several: dataloader_workers,pin_copies)")
    _markdown(p, cache=True)
    return p


def add_gaps(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "gaps", "GPU idle intervals per step, classified (input, launch, sync_wait, "
                                           "host_python, compile, other_stream, tail) with the function behind each",
                       json_help="print one JSON object: every gap, totals per class, top gaps",
                       top=(10, "longest gaps to list (default 10)"))
    _markdown(p, cache=True)
    return p


def add_gpu_kernels(subparsers) -> argparse.ArgumentParser:
    p = _trace_command(subparsers, "gpu-kernels", "GPU time by kernel (class, Tensor Cores, dtype), FLOPs and bytes per "
                                              "op against the device's peaks, MFU, and findings with fixes",
                       json_help="print one JSON object: device, kernels, ops, totals, "
                                                       "findings, warnings")
    p.add_argument("--top", type=int, default=None, help="kernels and ops to list (default 15; --json: all unless given)")
    p.add_argument("--device", help="GPU to compare against instead of the trace's deviceProperties (e.g. H100-SXM, "
                                    "A100-80GB, MI300X)")
    p.add_argument("--peaks", metavar="FILE", help="measured peaks (perfkit validate --write-peaks FILE on the same "
                                                   "GPU) in place of the datasheet's")
    _markdown(p)
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar and shapes caches")
    return p


def add_memory(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("memory", help="memory timeline of a trace recorded with profile_memory=True",
                              description=MEMORY_DESCRIPTION)
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help=".json / .json.gz trace file; of several (a pattern such as traces/train-*.pt.trace.json.gz) "
                        "the newest is read")
    p.add_argument("--json", action="store_true", help="print {devices: [...], warnings}")
    p.add_argument("--top", type=int, default=5, help="allocating ops listed per device (default 5)")
    _markdown(p)
    p.set_defaults(check_inputs=check_traces)
    return p


def add_mcp(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("mcp", help="a Model Context Protocol server over stdio for coding agents: perfkit's "
                                          "analyses as tools, every reply bounded (docs/agents.md)",
                              description="Serve MCP over stdin/stdout: open_trace, diagnose, whatif, sync_points, "
                                          "gaps, gpu_kernels, critical_path, hotspots, ranks, trace_diff, memory, "
                                          "summary and sql (read-only), on traces under the roots. Needs the mcp "
                                          "package: pip install \"perfkit[mcp]\".")
    p.add_argument("--root", action="append", default=None, metavar="DIR",
                   help="a folder the tools may read traces under (repeatable; default: the working directory); "
                        "paths outside every root, through `..` or a link too, are refused")
    p.add_argument("--budget", type=int, default=4000, metavar="TOKENS",
                   help="the most tokens (characters / 4) of a reply unless a call asks otherwise, 500 to 50,000 "
                        "(default 4,000)")
    return p


def add_annotate(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("annotate", help="write the trace plus critical-path, GPU-gap and finding tracks and "
                                               "GPU counters, to open in ui.perfetto.dev or chrome://tracing")
    p.add_argument("trace", help="one .json / .json.gz trace file")
    p.add_argument("-o", "--out", required=True, help="output trace (.json, or .json.gz to compress)")
    _no_cache(p)
    return p


def add_init(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("init", help="make a workbook folder (notebooks, reports/, README)",
                              description="Copy perfkit's investigation notebooks, a reports/ folder and a "
                                          "README stub into DIR for editing in JupyterLab.")
    p.add_argument("folder", metavar="DIR", help="the workbook folder (created if missing)")
    p.add_argument("--force", action="store_true", help="overwrite files that already exist")
    return p


def add_export(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("export", help="write traces as a Parquet dataset (DuckDB, Dask, Spark)")
    p.add_argument("traces", nargs="+", help=".json / .json.gz trace files or one tensorboard_trace_handler directory")
    p.add_argument("--parquet", required=True, metavar="DIR", help="the dataset directory to create")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    p.add_argument("--workers", type=int, default=None, help="parsing processes (default: one per core)")
    p.add_argument("--salvage", action="store_true", help="recover the complete events of a file cut off mid-write")
    _no_cache(p)
    return p


# perfkit.cli.COMMANDS name -> the function adding its parser (add_<name>)
PARSERS = {name: globals()[f"add_{name}"] for name in (
    "profile", "diagnose", "summary", "sync_points", "trace_diff", "ranks", "sql", "detect", "scan", "run", "log",
    "validate", "hotspots", "critical_path", "whatif", "gaps", "gpu_kernels", "memory", "mcp", "annotate", "init",
    "export",
)}
