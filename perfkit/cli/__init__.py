"""The ``perfkit`` command. Thin: each subcommand parses arguments and calls one library
function; errors become a one-line message and a non-zero exit code.

The arguments and help of every subcommand are in :mod:`perfkit.cli.parsers` (``add_<name>``, listed in
``PARSERS``; a parser may set ``unknown_args_hint``, a sentence added when the command line has
arguments it does not know, and ``check_inputs``, run on the parsed arguments before the body is
imported, so that a missing file is refused at once), which imports nothing heavy, so ``perfkit --help``
is quick. The body of ``perfkit <name>`` is ``run(args) -> int`` in ``perfkit/cli/<name>.py``
(``perfkit critical-path``: ``critical_path.py``; a command named for its investigation keeps its old name as
an alias, ``parsers.ALIASES``: ``perfkit syncs`` runs ``sync_points.py``), with its imports (pandas and up) at
the top; :func:`main` imports that one module once the arguments are parsed. Each body module also has
``register(subparsers)``, its parser bound to its ``run`` as ``func``, for a parser of your own.
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
from .parsers import ALIASES, PARSERS

COMMANDS = ("profile", "diagnose", "summary", "sync_points", "trace_diff", "ranks", "sql", "detect", "scan", "run",
            "log", "validate", "hotspots", "critical_path", "whatif", "gaps", "gpu_kernels", "memory", "mcp",
            "annotate", "init", "export")
# A later ``--`` while argparse reads the command line: no argument from the system holds a NUL.
_KEPT = "\0--"
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfkit", description="PyTorch performance investigations.")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = {name: PARSERS[name](sub) for name in COMMANDS}  # for errors with one command's usage
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    stdout = sys.stdout
    sys.stdout = PrintableStream(stdout)
    try:
        if getattr(args, "check_inputs", None) is not None:  # a missing file is refused before the imports
            args.check_inputs(args)
        # perfkit <command>'s body is perfkit/cli/<command>.py ("critical-path": critical_path.py, body_name), imported
        # here, inside the try, so that a missing optional package becomes the one-line message below
        command = importlib.import_module(f"{__name__}.{body_name(args.command)}")
        code = int(command.run(args) or 0)
        _flush(sys.stdout)
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


def body_name(command: str) -> str:
    """The module of ``perfkit <command>`` under ``perfkit/cli/``, for its name or an old name it keeps as an
    alias: ``critical-path`` -> ``critical_path``, ``syncs`` -> ``sync_points``."""
    name = next((name for name, aliases in ALIASES.items() if command in aliases), command)
    return name.replace("-", "_")


def _parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """The parsed command line. Only the first ``--`` separates: the script of ``perfkit profile s.py -- a
    -- b`` gets ``['a', '--', 'b']`` (argparse alone drops every ``--``, so later ones are kept aside)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argv.index("--") + 1 if "--" in argv else len(argv)
    args, unknown = parser.parse_known_args(argv[:first] + [_KEPT if a == "--" else a for a in argv[first:]])
    if hasattr(args, "script_args"):
        args.script_args = ["--" if a == _KEPT else a for a in args.script_args]
    elif first < len(argv):  # a command without script arguments reads its ``--`` as argparse does
        args, unknown = parser.parse_known_args(argv)
    if unknown:
        hint = getattr(args, "unknown_args_hint", "")
        commands = getattr(parser, "commands", {})
        parser = commands.get(body_name(args.command), parser)
        parser.error(f"unrecognized arguments: {printable(' '.join(unknown))}" + (f"; {hint}" if hint else ""))
    return args


def _flush(stream) -> None:
    """Flush ``stream``; a stream closed under us (by a script ``perfkit profile`` ran) has nothing to flush."""
    try:
        stream.flush()
    except ValueError:
        pass


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
