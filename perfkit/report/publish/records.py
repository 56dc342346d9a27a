"""The run record beside each report (``<name>.run.json``): status, failing cell, duration,
parameters and verdict card, versioned; written by the runner, read by the index."""
from __future__ import annotations

import json
import os
from pathlib import Path

RUN_RECORD_VERSION = 2


def record_json(fields: dict) -> str:
    """A run record as JSON text (``format_version`` first)."""
    return json.dumps({"format_version": RUN_RECORD_VERSION, **fields}, indent=1, default=repr)


def load_run_record(path: str | os.PathLike) -> dict:
    """Read a ``<name>.run.json``; {} when absent, unreadable or of another version."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and record.get("format_version") == RUN_RECORD_VERSION else {}
