"""``perfkit validate [--device auto] [--preset full|quick] [--only CHECK ...] [--out FILE] [--json]``:
run the reference workloads through perfkit's harnesses and detectors and check that perfkit
reports what the hardware does (pinned vs pageable copies, syncs, compile, AMP, leaks). Prints
one line per check as it finishes, then the markdown table; ``--out`` also writes the table to
FILE. Exit code 1 when a check fails or errors. ``--write-peaks FILE`` measures the GPU's achievable
peaks instead (:func:`perfkit.bench.peaks.measure_peaks`) and writes them to FILE."""
from __future__ import annotations

import sys

from ..atomic import write_text_atomic
from ..analysis.gpu_kernels.devices import write_peaks
from ..bench.peaks import measure_peaks
from ..text import json_text
from ..validation.suite import validate
from .parsers import add_validate


def register(subparsers) -> None:
    add_validate(subparsers).set_defaults(func=run)


def _progress(check) -> None:
    print(f"  {check.status:<8} {check.name}: {check.measured}", file=sys.stderr, flush=True)


def run(args) -> int:
    if args.write_peaks is not None:
        return _write_peaks(args)
    report = validate(args.device, preset=args.preset, only=args.only, on_check=_progress)
    markdown = report.to_markdown()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, markdown, user_output=True)
    if args.json:
        print(json_text(report.to_json(), indent=1, default=str))
    else:
        print(markdown, end="")
    return 1 if report.failed else 0


def _write_peaks(args) -> int:
    device = "cuda" if args.device == "auto" else args.device
    peaks = measure_peaks(device)
    path = write_peaks(args.write_peaks, peaks)
    print(json_text(peaks, indent=1) if args.json else f"peaks written to {path} (perfkit gpu-kernels --peaks {path} "
          f"TRACE reads them):\n{json_text(peaks, indent=1)}")
    return 0
