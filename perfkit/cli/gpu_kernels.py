"""``perfkit gpu-kernels TRACE [--json] [--top N] [--device NAME] [--peaks FILE]``: what the GPU does with its time
(old name, still an alias: ``perfkit kernels``)."""
from __future__ import annotations

from ..analysis.gpu_kernels import kernels
from ..errors import ParameterError
from ..report.terminal.gpu_kernels import format_kernels
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_gpu_kernels
from .paths import trace_arg


def register(subparsers) -> None:
    add_gpu_kernels(subparsers).set_defaults(func=run)


def run(args) -> int:
    if args.top is not None and args.top < 1:
        raise ParameterError(f"--top must be at least 1, got {args.top}")
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run)
    result = kernels(trace, device=args.device, peaks=args.peaks, use_cache=not args.no_cache)
    if args.markdown:
        print(reply_text("gpu_kernels", result.to_json(top=args.top), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(result.to_json(top=args.top)) if args.json else format_kernels(result, args.trace, args.top or 15))
    return 0
