"""Every perfkit frame in a shipped trace names the line where its function starts in the shipped
source, so `perfkit syncs` and the reports point at the right line. When a workload's source moves,
re-record: `.venv/bin/python scripts/record_traces.py` (data/traces/cpu)."""
from __future__ import annotations

import ast
import gzip
import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz"))
FRAME = re.compile(r"^(?:.*/)?(perfkit/[\w/]+\.py)\((\d+)\): (.+)$")


@lru_cache(maxsize=None)
def _functions(rel: str) -> dict[str, list[tuple[int, int]]]:
    """function name -> (first line, last line) of each def of that name: the first line as
    CPython's co_firstlineno (the first decorator, else `def`), which python_function frames carry."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(ast.parse((ROOT / rel).read_text(), filename=rel)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.setdefault(node.name, []).append((first, node.end_lineno))
    return spans


def _first_lines(rel: str) -> dict[str, set[int]]:
    return {name: {first for first, _ in spans} for name, spans in _functions(rel).items()}


def _perfkit_frames(path: Path) -> set[tuple[str, int, str, bool]]:
    """(file, line, function, on_stack) of each perfkit frame; on_stack: the frame was running when
    the profiler started (it began before the first step and encloses it), so its line is the line
    it was executing then, not its first line."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    step = min((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    frames = set()
    for e in events:
        m = FRAME.match(e.get("name", "")) if e.get("cat") == "python_function" else None
        if m:
            on_stack = e["ts"] < step["ts"] and e["ts"] + e.get("dur", 0) >= step["ts"] + step["dur"]
            frames.add((m[1], int(m[2]), m[3], on_stack))
    return frames


def _frame_ok(rel: str, line: int, func: str, on_stack: bool) -> bool:
    resumed = re.fullmatch(r"torch_dynamo_resume_in_(\w+)_at_(\d+)", func)
    if resumed:  # torch.compile's resume function after a graph break: the break's line, inside the function
        return int(resumed[2]) == line and any(a <= line <= b for a, b in _functions(rel).get(resumed[1], []))
    if func.startswith("<"):  # <lambda>, <genexpr>: no def to compare with; the line must exist
        return line <= len((ROOT / rel).read_text().splitlines())
    if on_stack:
        return any(a <= line <= b for a, b in _functions(rel).get(func, []))
    return line in _first_lines(rel).get(func, set())


def test_shipped_traces_are_present():
    assert len(TRACES) >= 10


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_perfkit_frames_name_the_line_their_function_starts_on(trace):
    frames = _perfkit_frames(trace)
    assert frames, f"{trace.name}: no perfkit python_function frames"
    wrong = []
    for rel, line, func, on_stack in sorted(frames):
        if not _frame_ok(rel, line, func, on_stack):
            wrong.append(f"{rel}({line}): {func} (starts at {sorted(_first_lines(rel).get(func, []))})")
    assert not wrong, (f"{trace.name}: frames off the shipped source, re-record with "
                       f"scripts/record_traces.py: {wrong}")


def test_the_check_sees_a_moved_function():
    first = min(_first_lines("perfkit/workloads/ppo.py")["_log_update"])
    assert _frame_ok("perfkit/workloads/ppo.py", first, "_log_update", False)
    assert not _frame_ok("perfkit/workloads/ppo.py", first - 18, "_log_update", False)  # 18 lines off, as issue 23 saw
    assert not _frame_ok("perfkit/workloads/ppo.py", first + 1, "_log_update", False)
    assert _frame_ok("perfkit/workloads/ppo.py", first + 1, "_log_update", True)  # running when profiling began
