"""One rank of a job that ``perfkit profile`` launched (``torchrun``, ``python -m torch.distributed.run``,
``torch.multiprocessing.spawn``): recorded from its first line by the ``sitecustomize`` of
``perfkit/profiling/bootstrap`` (put first on ``PYTHONPATH`` for the job), with the job's schedule, into the
job's folder.

A process is recorded when it is a rank: ``$RANK`` is set (``torchrun``'s workers), it is a
``multiprocessing`` spawn child (``mp.spawn``; its rank is torch.distributed's once the process group is
up, read at its first step), or it is the script ``perfkit profile --ranks`` started itself. A rank not
asked for (``--ranks 0,1``) records nothing; a process that never steps writes nothing. At exit the rank's
result (:func:`perfkit.profiling.session.finish`, its diagnosis and warnings) is written beside the
traces, in ``<folder>/.perfkit/``, for the parent to print. Nothing here may end the rank's training: a
failure is one line on the rank's stderr.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path

from ..atomic import write_text_atomic
from ..text import jsonable, printable
from .naming import TRACE_SUFFIX, current_rank, cycle_steps, cycle_trace, rank_label, selected, trigger_trace
from .recorder import Recorder
from .session import finish
from .trigger import SlowTrigger

JOB_VARIABLE = "PERFKIT_JOB"  # the job's settings (JSON), read by every process the job starts
TOP_VARIABLE = "PERFKIT_JOB_TOP"  # set for the one process perfkit started itself; taken by it, so not inherited
RESULTS = ".perfkit"  # the folder, inside the job's, of each rank's result


def results_folder(folder) -> Path:
    return Path(folder) / RESULTS


def start() -> None:
    """Start recording this process when it is a rank of the job in ``$PERFKIT_JOB``; never raises."""
    try:
        config = os.environ.get(JOB_VARIABLE)
        top = os.environ.pop(TOP_VARIABLE, None) is not None
        if not config or not (top or "RANK" in os.environ or "--multiprocessing-fork" in sys.argv):
            return
        job = json.loads(config)
        if "RANK" in os.environ and not selected(job["ranks"], current_rank()):
            return
        rank = RankRecording(job)
        rank.begin()
        atexit.register(rank.end)
    except Exception as exc:  # noqa: BLE001 (perfkit's failure must not stop the rank)
        _warn(f"could not start recording ({type(exc).__name__}: {exc}); the training runs unrecorded")


def _warn(message: str) -> None:
    print(printable(f"perfkit profile ({rank_label(current_rank())}): {message}"), file=sys.__stderr__ or sys.stderr)


class RankRecording:
    """The recorder of one rank: the job's schedule, named by run, rank and steps, the result saved at exit."""

    def __init__(self, job: dict):
        self.job, self.folder, self.run = job, Path(job["folder"]), job["run"]
        script = sys.argv[0] if sys.argv and os.path.isfile(sys.argv[0]) else None
        trigger = None
        if job.get("trigger"):
            trigger = SlowTrigger(job["trigger"], job.get("keep", 3), self._trigger_path)
        schedule = {k: job[k] for k in ("wait", "warmup", "active", "repeat")}
        self.recorder = _SelectedRecorder(job["ranks"], self.folder / f".{os.getpid()}{TRACE_SUFFIX}", **schedule,
                                          step=job.get("step"), memory=job.get("memory", False), script=script,
                                          metadata={"script": " ".join(sys.argv), "run": self.run},
                                          name_trace=self._cycle_path, trigger=trigger)
        self.entered = False

    def _cycle_path(self, cycle: int) -> Path:
        return cycle_trace(self.folder, self.run, self.recorder.rank, *cycle_steps(self.recorder.schedule, cycle))

    def _trigger_path(self, kind: str, step: int) -> Path:
        return trigger_trace(self.folder, self.run, self.recorder.rank, kind, step)

    def begin(self) -> None:
        self.recorder.__enter__()
        self.entered = True

    def end(self) -> None:
        """At the rank's exit: stop, diagnose and save the result; a failure is one line on stderr."""
        if not self.entered:
            return
        self.entered = False
        try:
            self.recorder.__exit__(None, None, None)
            if self.recorder.skipped or self.recorder.steps_seen == 0:
                return
            result = finish(self.recorder)
            rank = self.recorder.rank
            record = dict(result.to_json(), rank=rank, pid=os.getpid(), diagnosis_text=result.diagnosis_text,
                          trigger_text=result.trigger_text)
            out = results_folder(self.folder) / f"{rank_label(rank)}-{os.getpid()}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out, json.dumps(jsonable(record)))
        except Exception as exc:  # noqa: BLE001 (the rank's exit status is its own)
            _warn(f"could not save this rank's recording ({type(exc).__name__}: {exc})")


class _SelectedRecorder(Recorder):
    """A Recorder that, at its first step, stops for good when this process's rank (known by then: the process
    group is up) is not one the job asked for."""

    def __init__(self, ranks, path, **options):
        super().__init__(path, **options)
        self.ranks, self.skipped, self.rank = ranks, False, current_rank()

    def _on_step(self) -> None:
        if self.steps_seen == 0 and not self.skipped:
            self.rank = current_rank()  # at exit the process group may be gone
            if not selected(self.ranks, self.rank):
                self.skipped = True
                self._stop()
        if not self.skipped:
            super()._on_step()
