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

from ..profiling.session import profile_script
from ..report.publish.runner import run_all
from ..text import json_text, printable
from .parsers import add_profile
from .scan import format_table as format_scan


def register(subparsers) -> None:
    add_profile(subparsers).set_defaults(func=run)


def run(args) -> int:
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
    lines = [f"trace      {r.trace or '-'}",
             f"steps      {r.steps_recorded} recorded (steps from: {r.step_source})",
             f"overhead   {overhead_text(r)}", "", r.diagnosis_text]
    lines += [f"more trace {p}" for p in r.extra_traces]
    lines += [f"warning: {w}" for w in r.warnings]
    if r.scan is not None:
        lines += ["", "scan of the script:", format_scan(r.scan)]
    return "\n".join(lines)


def overhead_text(r) -> str:
    """The profiler's cost as measured, or why it is not a number."""
    if r.overhead_pct is None:
        return "not measured (needs 3+ wait steps and 3+ warm-up and active steps)"
    noise = r.overhead_noise_pct
    if noise is not None and abs(r.overhead_pct) <= noise:
        return (f"not measurable: {r.overhead_pct:+.1f}% is within the +/-{noise:.1f}% the steps without the "
                f"profiler varied by ({r.overhead_clock} clock)")
    return f"{r.overhead_pct:+.1f}% step time with the profiler on ({r.overhead_clock} clock)"


def _report(trace, quiet: bool) -> None:
    runs = run_all(["step_anatomy", "cpu_bound"], {"mode": "trace", "trace_path": str(trace)}, progress=False)
    for r in runs:
        line = f"report     {r.name}: {'ok' if r.ok else 'FAILED'} {r.html_path or r.error}"
        print(line, file=sys.stderr if quiet else sys.stdout)
