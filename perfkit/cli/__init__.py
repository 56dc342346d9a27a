"""The ``perfkit`` command. Thin: each subcommand parses arguments and calls one library
function; errors become a one-line message and a non-zero exit code.

Each subcommand lives in ``perfkit/cli/<name>.py`` and defines ``register(subparsers)``,
which adds its parser and sets ``func`` to a callable ``(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import PerfkitError

COMMANDS = ("summary", "syncs", "diff", "ranks", "sql", "detect", "scan", "run", "log", "validate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfkit", description="PyTorch performance investigations.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PerfkitError as exc:
        print(f"perfkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"perfkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
