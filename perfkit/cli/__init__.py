"""The ``perfkit`` command. Thin: each subcommand parses arguments and calls one library
function; errors become a one-line message and a non-zero exit code.

The arguments and help of every subcommand are in :mod:`perfkit.cli.parsers` (``add_<name>``, listed in
``PARSERS``; a parser may set ``unknown_args_hint``, a sentence added when the command line has
arguments it does not know), which imports nothing heavy, so ``perfkit --help`` is quick. The body of
``perfkit <name>`` is ``run(args) -> int`` in ``perfkit/cli/<name>.py`` (``perfkit critical-path``:
``critical_path.py``), with its imports (pandas and up) at the top; :func:`main` imports that one
module once the arguments are parsed. Each body module also has ``register(subparsers)``, its parser
bound to its ``run`` as ``func``, for a parser of your own.
Everything a command prints to stdout passes through :class:`perfkit.text.PrintableStream`, so no
escape sequence from a trace, script or file name reaches the terminal.
Exit codes: 0 done, 1 the command's own failure verdict, 2 an error (bad input or usage),
130 interrupted, 141 stdout closed early (``perfkit summary x | head``).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import PerfkitError, missing_dependency
from ..text import PrintableStream, printable
from .parsers import PARSERS

COMMANDS = ("profile", "diagnose", "summary", "syncs", "diff", "ranks", "sql", "detect", "scan", "run", "log",
            "validate", "hotspots", "critical_path", "gaps", "kernels", "memory", "annotate", "init", "export")
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfkit", description="PyTorch performance investigations.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        PARSERS[name](sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    stdout = sys.stdout
    sys.stdout = PrintableStream(stdout)
    try:
        # perfkit <command>'s body is perfkit/cli/<command>.py ("critical-path": critical_path.py), imported
        # here, inside the try, so that a missing optional package becomes the one-line message below
        command = importlib.import_module(f"{__name__}.{args.command.replace('-', '_')}")
        code = int(command.run(args) or 0)
        sys.stdout.flush()
        return code
    except PerfkitError as exc:
        print(f"perfkit {args.command}: error: {printable(exc)}", file=sys.stderr)
        return 2
    except ImportError as exc:
        missing = missing_dependency(exc, "this command")
        if missing is None:
            raise
        print(f"perfkit {args.command}: error: {printable(missing)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"perfkit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout(stdout)
        return EXIT_BROKEN_PIPE
    finally:
        sys.stdout = stdout


def _parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        hint = getattr(args, "unknown_args_hint", "")
        parser.error(f"unrecognized arguments: {printable(' '.join(unknown))}" + (f"; {hint}" if hint else ""))
    return args


def _silence_stdout(stdout) -> None:
    """The reader of our stdout is gone: point stdout at /dev/null so that the interpreter's final
    flush does not print a second BrokenPipeError (the recipe of the Python signal docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (captured in tests)
        pass


if __name__ == "__main__":
    sys.exit(main())
