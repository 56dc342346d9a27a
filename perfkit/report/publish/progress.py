"""The progress shown on stderr while a run's notebooks execute."""
from __future__ import annotations

import sys
import threading
import time

from tqdm.auto import tqdm

from .records import NotebookRun


class Progress:
    """"[3/7] compile_ab ... 12 s" on stderr: on a terminal the running notebook's name and its
    elapsed time refreshed every second (tqdm), elsewhere (a log file, CI) a line when it starts;
    then one line per finished notebook with its status and duration."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.index = total, enabled, 0
        self.bar = None

    def __enter__(self):
        if self.enabled and sys.stderr.isatty():
            self.bar = tqdm(total=self.total, unit="nb", file=sys.stderr, dynamic_ncols=True,
                            bar_format="{desc} [{elapsed} total]", mininterval=1.0)
            self.bar.refresh_thread = _Ticker(self.bar)
        return self

    def start(self, name: str) -> None:
        self.index += 1
        if self.bar is not None:
            self.bar.refresh_thread.watch(f"[{self.index}/{self.total}] {name}")
        elif self.enabled:
            print(f"[{self.index}/{self.total}] {name} ...", file=sys.stderr, flush=True)

    def done(self, run: NotebookRun) -> None:
        if self.bar is not None:
            self.bar.refresh_thread.watch(None)
            self.bar.write(f"[{self.index}/{self.total}] {run.name}: {run.status} in {run.duration_s:.1f} s",
                           file=sys.stderr)
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.index}/{self.total}] {run.name}: {run.status} in {run.duration_s:.1f} s", file=sys.stderr,
                  flush=True)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.refresh_thread.stop()
            self.bar.close()


class _Ticker:
    """Rewrites the bar's description with the notebook's elapsed seconds once a second."""

    def __init__(self, bar):
        self.bar, self.label, self.started = bar, None, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, label: str | None) -> None:
        self.label, self.started = label, time.perf_counter()
        self._tick()

    def _tick(self) -> None:
        if self.label:
            self.bar.set_description_str(f"{self.label} ... {time.perf_counter() - self.started:.0f} s")

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._tick()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
