"""``perfkit profile SCRIPT [ARGS...]`` (or ``-m MODULE [ARGS...]``): run a training script unchanged under the
PyTorch profiler, write the trace into the workbook's traces/ and print the diagnosis.

perfkit's options go before the script, the script's own after ``--``:
``perfkit profile --memory train.py -- --epochs 1``.
A step is one ``optimizer.step()`` (PyTorch's global optimizer hook); a loop without an optimizer
names its step function with ``--step`` (``plan`` or ``Planner.step`` defined in the script, or
``module:function``), or records a time window with ``--seconds``.
The script's exit status is perfkit's (1 for an exception, 130 for Ctrl-C), after what was recorded.
"""
from __future__ import annotations

import sys

from ..text import json_text, printable
from .scan import format_table as format_scan


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "profile", help="run a training script under the PyTorch profiler and diagnose the trace",
        description=__doc__.split("\n\n", 1)[0])
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
    p.add_argument("--seconds", type=float, default=None, help="record a window of this many seconds, no steps")
    p.add_argument("--memory", action="store_true", help="profile_memory=True: record [memory] events")
    p.add_argument("--out", default=None, help="folder for the trace (default: the workbook's traces/)")
    p.add_argument("--scan", action="store_true", help="also print `perfkit scan` of the script")
    p.add_argument("--report", action="store_true",
                   help="run the step_anatomy and cpu_bound notebooks on the trace (dated reports, perf log)")
    p.add_argument("--json", action="store_true",
                   help="print {trace, steps_recorded, step_source, overhead_pct, diagnosis, warnings}")
    p.set_defaults(func=run, unknown_args_hint="perfkit's options go before the script, the script's after "
                                                "`--`: perfkit profile --json train.py -- --epochs 1")


def run(args) -> int:
    from ..profiling.session import profile_script

    target = args.script
    result = profile_script(target, args.script_args, module=args.module, wait=args.wait, warmup=args.warmup,
                            active=args.active, repeat=args.repeat, step=args.step, seconds=args.seconds,
                            memory=args.memory, out=args.out, scan=args.scan)
    print(json_text(result.to_json(), indent=2) if args.json else format_result(result))
    if args.report and result.trace is not None:
        _report(result.trace, args.json)
    if result.error:
        print(f"perfkit profile: {printable(target)} failed: {printable(result.error)}", file=sys.stderr)
        return result.exit_status or 1
    return 0


def format_result(r) -> str:
    """The one screen: where the trace is, what was recorded, the profiler's cost, the diagnosis."""
    pct = "not measured (needs 2+ wait and 1+ warm-up steps)" if r.overhead_pct is None else f"{r.overhead_pct:+.1f}%"
    lines = [f"trace      {r.trace or '-'}",
             f"steps      {r.steps_recorded} recorded (steps from: {r.step_source})",
             f"overhead   {pct} step time with the profiler on", "", r.diagnosis_text]
    lines += [f"more trace {p}" for p in r.extra_traces]
    lines += [f"warning: {w}" for w in r.warnings]
    if r.scan is not None:
        lines += ["", "scan of the script:", format_scan(r.scan)]
    return "\n".join(lines)


def _report(trace, quiet: bool) -> None:
    from ..report.publish.runner import run_all

    runs = run_all(["step_anatomy", "cpu_bound"], {"mode": "trace", "trace_path": str(trace)}, progress=False)
    for r in runs:
        line = f"report     {r.name}: {'ok' if r.ok else 'FAILED'} {r.html_path or r.error}"
        print(line, file=sys.stderr if quiet else sys.stdout)
