import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared"))
SHARED_TRACES = SHARED / "traces" / "public"
SHARED_MEMORY = SHARED / "traces" / "memory"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Trace caches go to a per-test directory, never next to shared or project traces."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "perfkit-cache"))


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
