"""``validate(device)``: does perfkit see what this machine does?

Runs every check in :mod:`perfkit.validation.checks` (reference workloads with a known pathology and
its fix, through the harness or detector that must find it) and returns a
:class:`ValidationReport`: one row per check with the measured figure, the expectation, pass /
fail / error / inconclusive / skipped / measured, and the call that produced it. ``to_markdown()`` writes the table
with the machine's GPU, driver, CUDA and torch versions (``perfkit validate --out FILE``).

A check that raises is recorded as "error" with its message, so one broken harness does not
cost the figures of the others.
"""
from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pandas as pd

from ..bench.environment import environment_report
from ..device import is_cuda, resolve_device
from ..errors import ParameterError
from ..results import html_section, html_table, html_text, md_escape
from ..text import jsonable
from .checks import CHECKS, Check, PRESETS

STATUSES = ("pass", "fail", "error", "inconclusive", "skipped", "measured")
COLUMNS = ["check", "status", "measured", "expected", "claim", "command"]


@dataclass(frozen=True)
class ValidationReport:
    """The checks of one ``validate`` run on ``device`` with the ``preset`` sizes."""

    device: str
    preset: str
    checks: tuple[Check, ...]
    environment: dict
    date: str
    elapsed_s: float

    @property
    def failed(self) -> tuple[Check, ...]:
        """Checks whose status is "fail" or "error"."""
        return tuple(c for c in self.checks if c.status in ("fail", "error"))

    def counts(self) -> dict:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def counts_text(self) -> str:
        """"5 pass, 3 skipped, 1 measured": the statuses that occur, in ``STATUSES`` order."""
        return ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)

    def to_frame(self) -> pd.DataFrame:
        rows = [[c.name, c.status, c.measured, c.expected, c.claim, c.command] for c in self.checks]
        return pd.DataFrame(rows, columns=COLUMNS)

    def to_json(self) -> dict:
        """Device, machine and one record per check, as valid JSON (non-finite numbers are None)."""
        checks = [{"check": c.name, "status": c.status, "measured": c.measured, "expected": c.expected,
                   "claim": c.claim, "command": c.command, "values": c.values} for c in self.checks]
        return jsonable({"device": self.device, "preset": self.preset, "date": self.date,
                         "machine": self.environment, "checks": checks})

    def to_markdown(self) -> str:
        env = self.environment
        head = [f"# perfkit validation on {env['gpu']}", "",
                f"Run {self.date} with `perfkit validate --device {self.device} --preset {self.preset}` "
                f"in {self.elapsed_s:.0f} s.", "",
                "| GPU | driver | CUDA | torch | Python |", "|---|---|---|---|---|",
                f"| {env['gpu']} | {env['driver']} | {env['cuda']} | {env['torch']} | {env['python']} |", "",
                f"Result: {self.counts_text()}.", "",
                "| check | status | measured | expected |", "|---|---|---|---|"]
        rows = [f"| {md_escape(c.name)} | {c.status} | {md_escape(c.measured)} | {md_escape(c.expected)} |" for c in self.checks]
        calls = ["", "## How each figure was produced", ""]
        calls += [f"- **{c.name}** ({md_escape(c.claim)}): `{c.command}`" for c in self.checks if c.command]
        return "\n".join(head + rows + calls) + "\n"

    def __repr__(self) -> str:
        counts = ", ".join(f"{s}={n}" for s, n in self.counts().items() if n)
        return f"ValidationReport(device={self.device!r}, preset={self.preset!r}, {counts})"

    def _repr_html_(self) -> str:
        title = f"perfkit validation on {self.environment['gpu']} ({self.device}, {self.preset})"
        return html_section(title, f"<p>{html_text(repr(self))}</p>", html_table(self.to_frame(), max_rows=50))


def validate(device: str = "auto", *, preset: str = "auto", only: Iterable[str] | None = None,
             on_check: Callable[[Check], None] | None = None) -> ValidationReport:
    """Run the checks named in ``only`` (default all, in ``CHECKS`` order) on ``device`` with the
    ``preset`` sizes ("full" fills a GPU for a few seconds per check, "quick" is a CPU smoke run;
    "auto" picks full on CUDA, else quick); ``on_check`` is called
    with each finished check. Raises ParameterError for an unknown preset or check name, or for
    "cuda" without a GPU."""
    if preset not in PRESETS and preset != "auto":
        raise ParameterError(f"preset={preset!r}: use one of auto, {', '.join(PRESETS)}")
    names, dev, started = _names(only), resolve_device(device), time.perf_counter()
    preset = ("full" if is_cuda(dev) else "quick") if preset == "auto" else preset
    sizes = PRESETS[preset]
    checks = []
    for name in names:
        checks.append(_run_check(name, dev, sizes))
        if on_check is not None:
            on_check(checks[-1])
    date = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return ValidationReport(dev, preset, tuple(checks), machine(), date, time.perf_counter() - started)


def _names(only: Iterable[str] | None) -> list[str]:
    names = list(CHECKS) if only is None else list(only)
    unknown = [n for n in names if n not in CHECKS]
    if unknown or not names:
        raise ParameterError(f"unknown checks {unknown or names}: valid checks are {', '.join(CHECKS)}")
    return names


def _run_check(name: str, device: str, sizes) -> Check:
    try:
        return CHECKS[name](device, sizes)
    except Exception as exc:  # one failing harness must not lose the other checks' figures
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return Check(name, "", message, "", "error", "")


def machine() -> dict:
    """GPU name(s), driver, CUDA, torch and Python versions for the report header."""
    env = environment_report()
    gpus = ", ".join(f"{d['name']}" for d in env.devices) or "no GPU (CPU only)"
    return {"gpu": gpus, "driver": env.driver_version or "n/a", "cuda": env.cuda_version or "n/a",
            "torch": env.torch_version or "n/a", "python": env.python.split()[0]}
