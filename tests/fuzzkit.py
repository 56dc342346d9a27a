"""Shared helpers of the fuzz suite (``tests/test_fuzz_*.py``): hostile inputs, and runners that
check perfkit's answer to them is clean.

A clean answer is either a refusal (exit 2, one stderr line ``perfkit CMD: error: <file>: ...``:
a PerfkitError naming the file) or the answer the same input gives without its hostile part
(with a warning counting what was dropped). Never a traceback, a signal, invalid JSON, an escape
byte on stdout, or more than a memory/time budget.

Runners:

- :func:`run_cli` runs ``python -m perfkit ARGS`` in a subprocess under ``resource`` limits
  (address space, CPU seconds, wall clock): for bombs, signals, exit codes and closed pipes.
- :func:`run_python` runs a Python snippet the same way (library entry points such as the
  snapshot reader).
- :func:`run_main` runs ``perfkit.cli.main`` in this process (fast: for many generated inputs).

Each returns an :class:`Outcome`; ``outcome.assert_clean()`` / ``outcome.assert_refused(path)``
state the contract. To add a class of hostile input (parser, reports, ...), write
``tests/test_fuzz_<area>.py`` with these helpers; keep each file's subprocess count small (a
perfkit subprocess costs ~1 s, ~6 s when it imports torch): the whole suite must stay under
3 minutes on 2 CI cores.
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]



@dataclass(frozen=True)
class Budget:
    """What one run may cost: address space (MiB), CPU seconds and wall seconds."""

    mem_mb: int = 1536
    cpu_s: int = 60
    wall_s: float = 60.0


TORCH_BUDGET = Budget(mem_mb=4096, cpu_s=120, wall_s=120.0)  # `detect` imports torch


@dataclass
class Outcome:
    """What a run produced. ``rc`` is negative for a signal (subprocess) and None when
    ``run_main`` saw an uncaught exception (its traceback is in ``stderr``)."""

    argv: list
    rc: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    budget: Budget = field(default_factory=Budget)

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def why(self) -> str:
        return f"{self.argv}: rc={self.rc} in {self.seconds:.1f}s\n--- stdout\n{self.out[-2000:]}\n--- stderr\n{self.err[-3000:]}"

    def assert_clean(self, *, json_out: bool = False, codes=(0, 1, 2)) -> None:
        """No traceback, no signal, an expected exit code, printable stdout, within budget;
        with ``json_out``, stdout is one strictly valid JSON document."""
        assert self.rc is not None and self.rc >= 0, f"crashed or killed by a signal: {self.why()}"
        assert "Traceback (most recent call last)" not in self.err, f"traceback: {self.why()}"
        assert self.rc in codes, f"unexpected exit code: {self.why()}"
        assert self.seconds <= self.budget.wall_s, f"over the time budget: {self.why()}"
        assert_printable(self.out)
        if json_out:
            strict_json(self.out)

    def assert_refused(self, path, *needles: str) -> None:
        """Exit 2 with one stderr line that names ``path`` and contains each needle."""
        self.assert_clean(codes=(2,))
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected a one-line error: {self.why()}"
        assert str(path) in lines[0], f"the error does not name {path}: {self.why()}"
        for needle in needles:
            assert needle in lines[0], f"{needle!r} not in the error: {self.why()}"

    def json(self):
        return strict_json(self.out)


def assert_printable(text: str) -> None:
    """Nothing a terminal interprets: no C0/C1 control (ESC, CSI U+009B, BEL, CR...) but newline
    and tab, no DEL, no bidi override or other format character, no lone surrogate."""
    bad = sorted({c for c in text if not c.isprintable() and c not in "\n\t"})
    assert not bad, f"unprintable characters {bad} reached stdout: {text[:500]!r}"


def strict_json(text: str):
    """Parse JSON, refusing NaN/Infinity (which json.dumps writes and no JSON parser accepts)."""
    def refuse(token):
        raise AssertionError(f"invalid JSON constant {token} in output")

    return json.loads(text, parse_constant=refuse)


# --- runners ------------------------------------------------------------------------------------

def run_cli(*args, budget: Budget = Budget(), env: dict | None = None, cwd=None,
            drop_file_permissions: bool = False, stdin=subprocess.DEVNULL) -> Outcome:
    """``python -m perfkit ARGS`` in a subprocess under ``budget``."""
    return _run([sys.executable, "-m", "perfkit", *map(str, args)], budget, env, cwd, drop_file_permissions, stdin)


def run_python(code: str, *args, budget: Budget = Budget(), env: dict | None = None,
               drop_file_permissions: bool = False) -> Outcome:
    """``python -c CODE ARGS`` in a subprocess under ``budget`` (``sys.argv[1:]`` are ARGS)."""
    return _run([sys.executable, "-c", code, *map(str, args)], budget, env, None, drop_file_permissions,
                subprocess.DEVNULL)


def _run(argv, budget, env, cwd, drop, stdin) -> Outcome:
    full_env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1", **(env or {}))
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, env=full_env, cwd=cwd or ROOT, stdin=stdin,
                              timeout=budget.wall_s + 30, preexec_fn=_limiter(budget, drop))
    except subprocess.TimeoutExpired as exc:
        return Outcome(argv, -9, exc.stdout or b"", (exc.stderr or b"") + b"\n[killed: wall-clock timeout]",
                       time.monotonic() - start, budget)
    return Outcome(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start, budget)


def _limiter(budget: Budget, drop_file_permissions: bool):
    def limit():
        mem = budget.mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (budget.cpu_s, budget.cpu_s + 5))
        if drop_file_permissions:
            _drop_file_permission_override()
    return limit


def can_drop_file_permissions() -> bool:
    """True when a child process can be made to obey file permissions (always for a normal user;
    for root, when it may drop CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH from its bounding set)."""
    if os.geteuid() != 0:
        return True
    with tempfile.TemporaryDirectory() as tmp:
        locked = Path(tmp) / "locked"
        locked.write_text("x")
        locked.chmod(0)
        probe = _run([sys.executable, "-c", f"open({str(locked)!r}).read()"], Budget(), None, None, True,
                     subprocess.DEVNULL)
    return probe.rc != 0 and b"PermissionError" in probe.stderr


def _drop_file_permission_override() -> None:
    """In a child of root: drop the capabilities that let root read any file, so that chmod 000
    means what it means for a user (root's permitted set after exec is its bounding set)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_main(*args, stdin_text: str = "") -> Outcome:
    """``perfkit.cli.main(ARGS)`` in this process, stdout/stderr captured as bytes; an uncaught
    exception becomes ``rc=None`` with its traceback in stderr (argparse's SystemExit is an rc)."""
    from perfkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = list(map(str, args))
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: B902 - anything else is the failure this suite looks for
            rc = None
            err.write(traceback.format_exc())
    return Outcome(["perfkit", *argv], rc, out.getvalue().encode("utf-8", "surrogateescape"),
                   err.getvalue().encode("utf-8", "surrogateescape"), time.monotonic() - start)


# --- hostile values -----------------------------------------------------------------------------

# Names that try to drive a terminal: colours, a window title (OSC), a screen clear, an 8-bit CSI,
# a carriage return that overwrites the line, a newline that splits a table row, a bidi override.
ESCAPE_NAMES = (
    "\x1b[31mred\x1b[0m", "\x1b]0;pwned\x07title", "\x1b[2J\x1b[Hclear", "\x9b31mcsi", "over\rwrite",
    "two\nlines", "rtl\u202eexe.py", "nul\x00byte", "bell\x07",
)
# JSON number tokens that must not become a figure: non-finite, too large for float64 or int64.
NON_FINITE_TOKENS = ('"inf"', '"-inf"', '"Infinity"', '"nan"', '"1e999"')
HUGE_INTS = (2**70, -(2**70), 2**63, 2**64 - 1, 10**30)


def event(**fields) -> dict:
    """A complete (``ph: X``) host event with sane defaults; ``fields`` override or add."""
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1_000, "dur": 10, "args": {},
            **fields}


def kineto_text(events: list, **meta) -> bytes:
    """A trace in Kineto's layout (one event per line). An event given as ``str`` is written as
    that raw JSON text (for tokens json.dumps cannot write, such as ``1e999``)."""
    head = json.dumps({"schemaVersion": 1, **meta})[:-1]
    lines = ",\n".join("  " + (e if isinstance(e, str) else json.dumps(e)) for e in events)
    return (head + ', "traceEvents": [\n' + lines + "\n]}").encode()


def write_trace(path: Path, events: list, **meta) -> Path:
    path.write_bytes(kineto_text(events, **meta))
    return path


def lock(path: Path) -> Path:
    """chmod 000 (obeyed by a child started with ``drop_file_permissions=True``)."""
    path.chmod(0)
    return path


# --- file systems that refuse writes ------------------------------------------------------------

@contextlib.contextmanager
def small_tmpfs(path: Path, size_kb: int = 64, read_only: bool = False):
    """Mount a ``size_kb`` tmpfs at ``path`` (created) for the block, read-only if asked: a full
    disk or a read-only mount, for real. Skips the test where mounting is not allowed (not root,
    no CAP_SYS_ADMIN in a container)."""
    import pytest

    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                             capture_output=True) if os.geteuid() == 0 else None
    if mounted is None or mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the monkeypatched ENOSPC tests cover this case")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
