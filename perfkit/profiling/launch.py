"""``perfkit profile [--ranks 0,1|all] -- torchrun --nproc-per-node 2 train.py`` (or ``python -m
torch.distributed.run``, or a script that calls ``torch.multiprocessing.spawn``): every rank of a job recorded
with one schedule into one folder, then ``perfkit ranks`` over it.

The job runs as it would (its own processes, output and exit status); perfkit puts
``perfkit/profiling/bootstrap`` first on its ``PYTHONPATH`` and the schedule in ``$PERFKIT_JOB``, so each rank
records itself (:mod:`perfkit.profiling.child`) into ``<out>/<run>/`` and saves its diagnosis there. After the
job, :func:`collect` reads what the ranks saved and runs the cross-rank analysis on their traces.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..analysis.ranks.combine import ranks as cross_rank
from ..atomic import output_error
from ..errors import PerfkitError
from .child import JOB_VARIABLE, TOP_VARIABLE, results_folder
from .naming import RUN_VARIABLE, parse_ranks, run_folder, run_name

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap"


@dataclass(frozen=True)
class JobResult:
    """What a job's ranks recorded. ``folder``: the run's folder; ``ranks``: each recorded rank's result as it
    saved it (:meth:`perfkit.profiling.session.ProfileResult.to_json` plus ``rank``, ``pid``,
    ``diagnosis_text``, ``trigger_text``), by rank; ``cross_rank``: ``perfkit ranks`` of their traces (None with
    fewer than two); ``exit_status`` and ``error`` of the job; ``warnings``."""

    folder: Path
    command: tuple[str, ...]
    exit_status: int
    ranks: tuple[dict, ...]
    cross_rank: dict | None
    warnings: tuple[str, ...] = ()
    error: str = ""

    @property
    def recorded_nothing(self) -> bool:
        return not any(r.get("trace") for r in self.ranks)

    @property
    def traces(self) -> list[Path]:
        return [Path(t) for r in self.ranks for t in [r.get("trace"), *r.get("more_traces", [])] if t]

    def to_json(self) -> dict:
        out = {"folder": str(self.folder), "command": list(self.command), "exit_status": self.exit_status,
               "ranks": [{k: v for k, v in r.items() if k not in ("diagnosis_text", "trigger_text")} for r in self.ranks],
               "cross_rank": self.cross_rank, "warnings": list(self.warnings)}
        if self.error:
            out["error"] = self.error
        return out


def profile_job(command, *, name: str, ranks="all", top: bool = False, out=None, **schedule) -> JobResult:
    """Run ``command`` (a launcher and its arguments, or ``[python, script, ...]`` with ``top``: that process is
    recorded too) with each rank in ``ranks`` recording itself with ``schedule`` (``wait``, ``warmup``,
    ``active``, ``repeat``, ``step``, ``memory``, ``trigger``, ``keep``) into ``<out>/<name>-<date>/``.
    Raises ParameterError for bad ranks, OutputError when the folder cannot be made, PerfkitError when the
    command cannot start."""
    chosen = parse_ranks(ranks)
    run = run_name(name)
    folder = run_folder(run, out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(folder, exc) from exc
    env = dict(os.environ, **{JOB_VARIABLE: json.dumps({"folder": str(folder), "run": run, "ranks": chosen, **schedule}),
                              RUN_VARIABLE: run})
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if top:
        env[TOP_VARIABLE] = "1"
    status = _run(list(command), env)
    return collect(folder, command, status)


def _run(command: list[str], env: dict) -> int:
    """The job's exit status (128 + N for a signal N, as a shell says it); Ctrl-C reaches the job too (one process
    group) and perfkit waits for it to end, so what the ranks recorded is kept."""
    try:
        process = subprocess.Popen(command, env=env)
    except OSError as exc:
        raise PerfkitError(f"could not start {command[0]!r}: {exc.strerror or exc}; check that it is installed "
                           "and on PATH") from exc
    while True:
        try:
            code = process.wait()
            break
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
    return 128 - code if code < 0 else code


def collect(folder, command=(), exit_status: int = 0) -> JobResult:
    """What the ranks of the job in ``folder`` saved, and ``perfkit ranks`` over their traces."""
    folder, warnings = Path(folder), []
    records = []
    for path in sorted(results_folder(folder).glob("*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            warnings.append(f"{path}: a rank's result could not be read ({exc}); its trace is still in {folder}")
    records.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("pid") or 0))
    traces = [r["trace"] for r in records if r.get("trace")]
    combined = None
    if len(traces) >= 2:
        try:
            combined = cross_rank(traces, workers=1).to_json()
        except PerfkitError as exc:
            warnings.append(f"perfkit ranks could not read the ranks' traces: {exc}")
    error = f"the job exited with status {exit_status}" if exit_status else ""
    if not records:
        warnings.append("no rank recorded a step: check that the job's processes call optimizer.step() (or pass "
                        "--step), that their Python has perfkit installed, and that --ranks names ranks the job has")
    return JobResult(folder, tuple(map(str, command)), exit_status, tuple(records), combined, tuple(warnings), error)
