"""``perfkit profile SCRIPT [ARGS...]`` (or ``-m MODULE [ARGS...]``): run a training script unchanged under the
PyTorch profiler, write the trace into the workbook's traces/ and print the diagnosis.

perfkit's options go before the script, the script's own after ``--``:
``perfkit profile --memory train.py -- --epochs 1``.
A step is one ``optimizer.step()`` (PyTorch's global optimizer hook); a loop without an optimizer
names its step function with ``--step`` (``plan`` or ``Planner.step`` defined in the script, or
``module:function``), or records a time window with ``--seconds``.
The script's exit status is perfkit's (1 for an exception, 130 for Ctrl-C), after what was recorded; a run
that recorded no step (no trace, or none of the steps asked for) exits 1 with the reason on stderr.
The script's own output is passed through unchanged; perfkit's report is sanitized and goes to the stdout
perfkit started with (not the log file the script pointed ``sys.stdout`` or descriptor 1 at), or to stderr
when the script closed it. A recording that is not the script's (it runs its own profiler, the trace could not be written)
exits 1 with the reason on stderr.
A launcher (``perfkit profile -- torchrun --nproc-per-node 2 train.py``, ``python -m torch.distributed.run``) or
``--ranks`` runs the job as its own processes, each rank recording itself; the job's exit status is perfkit's.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from ..profiling.launch import profile_job
from ..profiling.session import profile_script
from ..profiling.target import job_command
from ..profiling.timing import few_steps_text, spread_pct
from ..report.publish.runner import run_all
from ..report.terminal.memory import growth_lines
from ..report.terminal.ranks import format_ranks
from ..text import PrintableStream, json_text, printable, printable_data
from .parsers import add_profile
from .scan import format_table as format_scan


def register(subparsers) -> None:
    add_profile(subparsers).set_defaults(func=run)


def run(args) -> int:
    job = job_command(args.script, args.script_args, module=args.module, ranks=args.ranks)
    if job is not None:
        return _run_job(args, *job)
    stdout = _raw(sys.stdout)
    sys.stdout = script_out = _LineEnd(stdout)  # the script's output is its own: not escaped like perfkit's
    with _StartingStdout(stdout) as started:
        try:
            result = profile_script(args.script, args.script_args, module=args.module, wait=args.wait,
                                    warmup=args.warmup, active=args.active, repeat=args.repeat, step=args.step,
                                    seconds=args.seconds, memory=args.memory, out=args.out, scan=args.scan,
                                    trigger=args.trigger, keep=args.keep)
        finally:  # the script may have replaced or closed sys.stdout, or moved its file descriptor (os.dup2)
            report_to = started.stream()
            sys.stdout = out = _open_stream(report_to)
        if script_out.mid_line and report_to is stdout:  # perfkit's report starts on a line of its own
            print(file=out)
        return _report_result(args, result, out)


class _LineEnd:
    """The script's stdout, passed through unchanged, noting whether the script's last write left a line
    unfinished (``print(x, end="")``, 20 MB of progress on one line): perfkit's report must not be glued to it."""

    def __init__(self, stream):
        self._stream = stream
        self.mid_line = False

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        if text:
            self.mid_line = not text.endswith("\n")
        return written

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _report_result(args, result, out) -> int:
    """Print the result to ``out`` and the reason for a failed run to stderr; returns the exit status."""
    target = args.script
    print(json_text(result.to_json(), indent=2) if args.json else format_result(result), file=out)
    if args.report and result.trace is not None:
        _report(result.trace, out if not args.json else sys.stderr)
    if result.problem:
        print(f"perfkit profile: {printable(result.problem)}", file=sys.stderr)
    if result.error:
        print(f"perfkit profile: {printable(target)} failed: {printable(result.error)}", file=sys.stderr)
        return result.exit_status or 1
    if result.problem:
        return 1
    if result.recorded_nothing:
        reason = result.warnings[0] if result.warnings else "no step was recorded"
        print(f"perfkit profile: nothing recorded: {printable(reason)}", file=sys.stderr)
        return 1
    return 0


def _run_job(args, command: list[str], top: bool) -> int:
    """A job of several processes (:func:`perfkit.profiling.launch.profile_job`): the job's exit status, or 1 when
    no rank recorded a step."""
    name = next((Path(a).stem for a in command[1:] if a.endswith(".py")), Path(args.script).stem)
    result = profile_job(command, name=name, top=top,
                         ranks=args.ranks or "all", out=args.out, wait=args.wait, warmup=args.warmup, active=args.active,
                         repeat=args.repeat, step=args.step, memory=args.memory, trigger=args.trigger, keep=args.keep)
    print(json_text(result.to_json(), indent=2) if args.json else format_job(result))
    if result.error:
        print(f"perfkit profile: {printable(result.error)}", file=sys.stderr)
        return result.exit_status
    if result.recorded_nothing:
        print(f"perfkit profile: nothing recorded: {printable(result.warnings[-1])}", file=sys.stderr)
        return 1
    return 0


def format_job(r) -> str:
    """Each rank's trace and verdict, then ``perfkit ranks`` of them."""
    lines = [f"folder     {r.folder}"]
    for rank in r.ranks:
        label = f"rank {rank['rank']}" if rank.get("rank") is not None else f"pid {rank.get('pid')}"
        verdict = (rank.get("diagnosis") or {}).get("title", "no trace")
        lines += [f"{label:<10} {rank.get('trace') or '-'} ({rank.get('steps_recorded', 0)} steps)", f"           {verdict}"]
        lines += [f"           warning: {w}" for w in rank.get("warnings", [])]
        if rank.get("trigger_text"):
            lines += ["", rank["trigger_text"]]
    if r.cross_rank is not None:
        lines += ["", f"perfkit ranks {r.folder}:", format_ranks(printable_data(r.cross_rank))]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def format_result(r) -> str:
    """The one screen: where the trace is, what was recorded, the profiler's cost, the diagnosis."""
    few = "" if any("too few to rank causes" in w for w in r.warnings) else few_steps_text(r.steps_recorded)
    lines = [f"trace      {r.trace or '-'}",
             f"steps      {r.steps_recorded} recorded (steps from: {r.step_source}){'; ' + few if few else ''}"]
    if r.step_median_s is not None:
        lines.append(f"step time  {step_time_text(r)}")
    lines += [f"overhead   {overhead_text(r)}"]
    lines += growth_lines(printable_data(r.memory)) if r.memory is not None else []
    lines += ["", r.diagnosis_text]
    lines += [f"more trace {p}" for p in r.extra_traces]
    if r.trigger is not None:
        lines += [f"trigger    {trigger_text(r.trigger)}"]
        lines += ["", "median step vs the slowest (perfkit trace-diff):", r.trigger_text] if r.trigger_text else []
    lines += [f"warning: {w}" for w in r.warnings]
    if r.scan is not None:
        lines += ["", "scan of the script:", format_scan(r.scan)]
    return "\n".join(lines)


def trigger_text(t: dict) -> str:
    """'3 of 40 steps kept at slow:1.5x (min 10.2 / median 11 / max 30.1 ms)'."""
    if not t.get("steps"):
        return f"{t['trigger']}: no step timed"
    return (f"{len(t['slow'])} of {t['steps']} steps kept at {t['trigger']} (min {t['min_ms']:,.3g} / median "
            f"{t['median_ms']:,.3g} / max {t['max_ms']:,.3g} ms)")


def step_time_text(r) -> str:
    """'median 1.12 ms (1.04 to 2.06 ms over 3 steps, spread +/-46%, host clock)' of the recorded steps
    (spread: ``profiling.timing.spread_pct``)."""
    timed = [t for t in r.step_times_s if t is not None]
    text = f"median {r.step_median_s * 1e3:,.3g} ms"
    if len(timed) > 1:
        text += f" ({min(timed) * 1e3:,.3g} to {max(timed) * 1e3:,.3g} ms over {len(timed)} steps"
        spread = spread_pct(timed)
        text += f", spread +/-{spread:.0f}%" if spread is not None else ""
        return text + f", {r.overhead_clock} clock)"
    return text + f" ({r.overhead_clock} clock)"


def overhead_text(r) -> str:
    """The profiler's cost as measured, or why it is not a number (then the number is left out: see --json)."""
    if not r.overhead_measurable:
        return r.overhead_unmeasurable or "not measured"
    return f"{r.overhead_pct:+.1f}% step time with the profiler on ({r.overhead_clock} clock)"


def _raw(stream):
    """The stream under the CLI's :class:`PrintableStream` (the script writes to it unchanged)."""
    return stream._stream if isinstance(stream, PrintableStream) else stream


class _StartingStdout:
    """The stdout perfkit started with, kept by its file descriptor too: a script that moves descriptor 1
    (``os.dup2(log.fileno(), 1)``) would otherwise get perfkit's report in its log."""

    def __init__(self, stream):
        self._stream, self._kept, self._opened = stream, None, None
        try:
            fd = stream.fileno()
            self._kept = (fd, os.dup(fd), os.fstat(fd))
        except (AttributeError, OSError, ValueError):  # no descriptor (a notebook's or pytest's stream)
            pass

    def __enter__(self) -> "_StartingStdout":
        return self

    def stream(self):
        """``stream``, or a stream on the kept descriptor when the script moved the one it was on."""
        if self._kept is None:
            return self._stream
        fd, kept, before = self._kept
        try:
            now = os.fstat(fd)
            moved = (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino)
        except OSError:  # the script closed descriptor 1
            moved = True
        if not moved:
            return self._stream
        self._opened = os.fdopen(kept, "w", encoding=getattr(self._stream, "encoding", None) or "utf-8")
        self._kept = None
        return self._opened

    def __exit__(self, *exc) -> bool:
        if self._opened is not None:
            with contextlib.suppress(OSError, ValueError):
                self._opened.close()
        elif self._kept is not None:
            os.close(self._kept[1])
        return False


def _open_stream(stream):
    """``stream`` (sanitized) when it can still be written, else stderr (a script that closed sys.stdout)."""
    try:
        stream.flush()
        return PrintableStream(stream)
    except (ValueError, OSError):
        return PrintableStream(sys.__stderr__ if sys.__stderr__ is not None else sys.stderr)


def _report(trace, out) -> None:
    runs = run_all(["step_anatomy", "cpu_bound"], {"mode": "trace", "trace_path": str(trace)}, progress=False)
    for r in runs:
        print(f"report     {r.name}: {'ok' if r.ok else 'FAILED'} {r.html_path or r.error}", file=out)
