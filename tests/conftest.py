import functools
import os
from pathlib import Path

import pytest

from perfkit.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared"))
SHARED_TRACES = SHARED / "traces" / "public"
SHARED_MEMORY = SHARED / "traces" / "memory"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Trace caches go to a per-test directory, never next to shared or project traces."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "perfkit-cache"))


# The suites of odd and broken input: each chunk they decode is decoded by both decoders too, and compared.
WATCHED = ("test_hostile_trace_json", "test_hostile_trace_shapes", "test_hostile_dropped_events", "test_fuzz_load",
           "test_fuzz_parser", "test_fuzz_values", "test_fuzz_cache", "test_trace_parse", "test_trace_load",
           "test_trace_errors", "test_legacy_export", "test_columns", "test_trace_shapes", "test_native")


@pytest.fixture(autouse=True)
def _decoders_agree(request, monkeypatch):
    if request.module.__name__.rpartition(".")[2] in WATCHED:
        from decoders import watch_decoders

        watch_decoders(monkeypatch)


def shared_trace(name: str) -> Path:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not found: real traces live in ../shared/traces (absent on a fresh clone)")
    return path


def shared_memory(name: str) -> Path:
    path = SHARED_MEMORY / name
    if not path.exists():
        pytest.skip(f"{path} not found: memory snapshots live in ../shared/traces/memory")
    return path


def shared_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.glob("*.json*"))


def loaded_trace(path) -> "perfkit.trace.Trace":
    """The Trace of ``path``, loaded once per test process, for the loops that check analyses on
    every trace: analyses keep their results on the Trace (``Trace.derived``), so the label,
    figure, count and kernel loops of one trace share one diagnosis. Never modify it; tests of
    loading itself call ``load_trace``."""
    return _loaded(str(Path(path).resolve()))


@functools.lru_cache(maxsize=None)
def _loaded(path: str):
    return load_trace(path)


# The first check (README: `pytest -q -m quick`): a few minutes on a loaded 2-core machine, one or two test files
# of each layer (trace <- analysis, bench <- report <- cli, notebooks; the layout rules), none of them slow.
# Every test in these files not marked slow or shared gets the `quick` mark (tests/test_quick_subset.py checks
# that every layer is here).
QUICK = {
    "trace": ("tests/trace/test_steps.py", "tests/test_trace_errors.py"),
    "analysis": ("tests/analysis/step/test_warmup.py", "tests/analysis/step/test_findings.py"),
    "bench": ("tests/test_bench_compare.py", "tests/bench/test_peaks.py"),
    "report": ("tests/report/test_prose.py", "tests/test_report_index.py"),
    "cli": ("tests/cli/test_inputs.py",),
    "profiling": ("tests/profiling/test_timing.py",),
    "notebooks": ("tests/test_notebook_setup.py",),
    "layout": ("tests/test_readme.py", "tests/test_layout.py"),
}
_QUICK_FILES = {ROOT / f for files in QUICK.values() for f in files}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(item.fspath) in _QUICK_FILES and not item.get_closest_marker("slow") \
                and not item.get_closest_marker("shared"):
            item.add_marker(pytest.mark.quick)
