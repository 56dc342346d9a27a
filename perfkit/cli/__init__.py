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
Exit codes: 0 done, 1 the command's own failure verdict or standard output that cannot be written
(``> /dev/full``, ``>&-``: one line on stderr), 2 an error (bad input or usage), 130 interrupted, 141 stdout
closed early (``perfkit summary x | head``: quietly, as ``head`` expects). Text that the terminal's encoding
cannot show (a name in Japanese under an ASCII locale) is printed as ``\\u`` escapes, and a write past
``ulimit -f`` fails with an error instead of killing perfkit with a half-written file (SIGXFSZ is ignored).
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys

from ..errors import ParameterError, PerfkitError, missing_dependency
from ..text import PrintableStream, StreamWriteError, printable
from .parsers import ALIASES, PARSERS

COMMANDS = ("profile", "diagnose", "summary", "sync_points", "trace_diff", "ranks", "sql", "detect", "scan", "run",
            "log", "validate", "hotspots", "critical_path", "whatif", "gaps", "gpu_kernels", "memory", "mcp",
            "annotate", "init", "export")
# A later ``--`` while argparse reads the command line: no argument from the system holds a NUL.
_KEPT = "\0--"
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfkit", description="PyTorch performance investigations.")
    parser.add_argument("--version", action=_Version, help="show perfkit's version and which trace decoder it uses")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = {name: PARSERS[name](sub) for name in COMMANDS}  # for errors with one command's usage
    return parser


class _Version(argparse.Action):
    """``perfkit --version``: the version, and the decoder in use (the C extension, or the pure-Python path where
    it was not built), looked up only when asked (``perfkit --help`` imports nothing heavy)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__
        from ..trace.loader import native
        print(f"perfkit {__version__}\n{native.describe()}")
        parser.exit()


def main(argv=None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    stdout = sys.stdout if sys.stdout is not None else _Closed()  # ``perfkit summary x >&-``
    _prepare(stdout)
    sys.stdout = PrintableStream(stdout)
    try:
        _check_working_directory()
        if getattr(args, "check_inputs", None) is not None:  # a missing file is refused before the imports
            args.check_inputs(args)
        # perfkit <command>'s body is perfkit/cli/<command>.py ("critical-path": critical_path.py, body_name), imported
        # here, inside the try, so that a missing optional package becomes the one-line message below
        command = importlib.import_module(f"{__name__}.{body_name(args.command)}")
        code = int(command.run(args) or 0)
        _flush(sys.stdout)
        return code
    except StreamWriteError as exc:  # a full disk or a closed descriptor: what was printed is not all there
        _silence_stdout(stdout)
        print(f"perfkit {args.command}: error: {printable(exc)}", file=sys.stderr)
        return 1
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
        sys.stdout = stdout if not isinstance(stdout, _Closed) else None


class _Closed:
    """Standard output when descriptor 1 was closed before perfkit started (Python's ``sys.stdout`` is None
    then): the first write fails as a write to a closed descriptor does."""

    name = "<stdout>"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "the descriptor is closed (>&-)")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _prepare(stdout) -> None:
    """Characters the terminal's encoding lacks become ``\\u`` escapes instead of a UnicodeEncodeError, and
    a file past ``ulimit -f`` is a write error (EFBIG, reported and cleaned up) instead of SIGXFSZ killing
    perfkit mid-write."""
    for stream in (stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's StringIO), or closed
            pass
    if hasattr(signal, "SIGXFSZ"):
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass


def _check_working_directory() -> None:
    try:
        os.getcwd()
    except FileNotFoundError:
        raise ParameterError("the working directory was deleted (or moved) after this shell entered it; "
                             "cd to an existing folder and run the command again") from None


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
    """Flush ``stream``; a stream closed under us (by a script ``perfkit profile`` ran) has nothing to flush.
    Raises StreamWriteError (BrokenPipeError) when the flush fails."""
    try:
        stream.flush()
    except StreamWriteError as exc:
        if "closed file" not in str(exc):
            raise


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
