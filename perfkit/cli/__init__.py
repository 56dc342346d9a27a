"""The ``perfkit`` command. Thin: each subcommand parses arguments and calls one library
function; errors become a one-line message and a non-zero exit code.

Each subcommand lives in ``perfkit/cli/<name>.py`` and defines ``register(subparsers)``,
which adds its parser and sets ``func`` to a callable ``(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import PerfkitError

COMMANDS = ("summary", "syncs", "diff", "detect", "scan", "run", "log", "validate", "init")


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
    except BrokenPipeError:
        # `perfkit summary X | head -3`: the reader left; stop quietly, as cat and grep do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
