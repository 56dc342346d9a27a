"""Static sync-point scanner: ``scan(paths) -> ScanReport`` reads Python source, never runs it.

Each rule (catalog in ``perfkit.detect.sync_rules.RULES``) is a pattern in the AST that usually forces
a host-device sync or wastes device time; ``perfkit.detect.checker`` finds them, one pass per
file. The tensor-or-not guesses are heuristics local to one file (see ``rules.ExprKinds``), so
findings are leads to check, not proofs; ``perfkit detect`` confirms them at run time. This
module walks the paths, parses each file, applies the ignore comments and reports: a line ending
in ``# perfkit: ignore`` (every rule) or ``# perfkit: ignore[rule-id, other-id]`` is silenced.
"""
from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import ParameterError
from ..limits import MAX_NESTING_DEPTH, SCAN_MAX_FILE_BYTES
from ..results import html_section, html_table, html_text, html_warnings
from . import sync_rules as R
from .checker import check_tree

__all__ = ["ScanFinding", "ScanReport", "scan", "scan_file"]

SKIP_DIRS = frozenset({".venv", "venv", "site-packages", "__pycache__", "node_modules"})
_IGNORE = re.compile(r"#\s*perfkit:\s*ignore(?:\[([^\]]*)\])?")
_COLUMNS = ["file", "line", "rule", "severity", "message", "fix"]


@dataclass(frozen=True)
class ScanFinding:
    """One rule match at ``file:line``; ``fix`` is the rule's suggested change."""

    file: str
    line: int
    rule: str
    message: str
    severity: str
    fix: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "rule": self.rule, "message": self.message,
                "severity": self.severity, "fix": self.fix}


@dataclass(frozen=True)
class ScanReport:
    """Findings of ``scan()`` sorted by file and line, the files read and the rules run."""

    findings: tuple[ScanFinding, ...]
    files: tuple[str, ...]
    rules: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def counts_by_rule(self) -> dict[str, int]:
        """Rule id -> number of findings, for every rule that ran (zeros included)."""
        counts = {r: 0 for r in self.rules}
        for f in self.findings:
            counts[f.rule] = counts.get(f.rule, 0) + 1
        return counts

    def to_records(self) -> list[dict]:
        """``[{file, line, rule, message, severity, fix}, ...]``, the JSON shape of ``perfkit scan --json``."""
        return [f.to_dict() for f in self.findings]

    def to_frame(self) -> pd.DataFrame:
        """Columns: file, line, rule, severity, message, fix."""
        return pd.DataFrame(self.to_records(), columns=_COLUMNS)

    def __repr__(self) -> str:
        return f"ScanReport({len(self.findings)} findings in {len(self.files)} files)"

    def _repr_html_(self) -> str:
        counts = ", ".join(f"{html_text(r)}: {n}" for r, n in self.counts_by_rule.items() if n)
        return html_section(
            f"Static sync scan: {len(self.findings)} findings in {len(self.files)} files",
            html_warnings(self.warnings), f"<p>{counts}</p>" if counts else "", html_table(self.to_frame(), 50))


def scan(paths, *, rules=None) -> ScanReport:
    """Scan Python files (directories recursively) for sync-point patterns.

    ``paths``: a path or a list of paths; directories skip hidden folders, ``.venv``, ``venv``,
    ``site-packages``, ``__pycache__`` and ``node_modules`` (a file named explicitly is always
    read). ``rules``: rule ids to run (default: every rule in ``rules.RULES``). A file that does
    not parse yields one ``parse-error`` finding; a file or directory that cannot be read (a
    dangling link, a link loop, no permission, not a regular file, larger than
    ``PERFKIT_SCAN_MAX_FILE_BYTES``) gives a warning, and the scan goes on. Code nested too deeply
    for the checker's recursion (generated code) is checked except for the parts nested deeper
    than ``PERFKIT_MAX_NESTING_DEPTH``, with a warning. Raises ParameterError for a path that
    does not exist or an unknown rule id.
    """
    selected = _select_rules(rules)
    files, warnings = _collect(paths)
    findings = []
    for path in files:
        found, notes = scan_file(path)
        findings.extend(f for f in found if f.rule in selected or f.rule == "parse-error")
        warnings.extend(notes)
    if not files:
        warnings.append("no Python files found under the given paths")
    findings.sort(key=lambda f: (f.file, f.line, f.rule))
    return ScanReport(tuple(findings), tuple(str(p) for p in files), tuple(selected), tuple(warnings))


def scan_file(path) -> tuple[list[ScanFinding], list[str]]:
    """(findings of every rule in one file, ignore comments applied; warnings). The source is
    decoded as Python does (a UTF-8 BOM, a ``# -*- coding: ... -*-`` line). A file that cannot be
    read, or whose coding line names a codec that cannot decode it, gives no finding and one warning."""
    path = str(path)
    try:
        source = read_source(Path(path))
    except _Unreadable as exc:
        return [], [f"{path}: not scanned: {exc}"]
    except (SyntaxError, UnicodeDecodeError) as exc:  # undeclared non-UTF-8 bytes: what Python says
        return [_parse_error(path, exc)], []
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        return [_parse_error(path, exc)], []
    except (RecursionError, MemoryError):  # CPython's own parser gives up (~3,000 levels)
        return [_parse_error(path, SyntaxError("nested too deeply for Python's parser (it cannot run either)"))], []
    try:
        return _findings(path, source, tree), []
    except RecursionError:  # rare (generated code): check all but the too-deep parts
        return _findings_pruned(path, source, tree)


def _findings_pruned(path: str, source: str, tree: ast.AST) -> tuple[list[ScanFinding], list[str]]:
    limit = MAX_NESTING_DEPTH.value()
    lines = prune_deep(tree, limit)
    note = (f"{path}:{lines[0] if lines else 1}: code nested more than {limit} levels deep was not checked "
            f"({len(lines)} place{'s' * (len(lines) != 1)}; usually generated code)")
    try:
        return _findings(path, source, tree), [note]
    except RecursionError:
        return [], [f"{path}: not scanned: nesting too deep for the checker even at "
                    f"PERFKIT_MAX_NESTING_DEPTH={limit}: lower it"]


def _findings(path: str, source: str, tree: ast.AST) -> list[ScanFinding]:
    ignores = _ignore_comments(source)
    out, seen = [], set()
    for line, end, rule, message in check_tree(tree):
        if (line, rule) in seen or _ignored(ignores, line, end, rule):
            continue
        seen.add((line, rule))
        meta = R.RULES[rule]
        out.append(ScanFinding(path, line, rule, message, meta.severity, meta.fix))
    return out


class _Unreadable(Exception):
    """A source file that cannot be read (the message says why)."""


def read_source(path: Path) -> str:
    """The text of a Python source file, decoded as the interpreter would (BOM, coding line).
    Raises _Unreadable (missing target, link loop, permission, not a regular file, too large, a
    coding line naming an unknown codec or one that cannot decode the file), SyntaxError for
    non-UTF-8 bytes without a coding line, UnicodeDecodeError for bytes UTF-8 cannot decode."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise _Unreadable("not a regular file")
        if info.st_size > SCAN_MAX_FILE_BYTES.value():
            raise _Unreadable(SCAN_MAX_FILE_BYTES.refusal(f"{info.st_size:,} bytes"))
        data = path.read_bytes()
    except FileNotFoundError:
        raise _Unreadable("a link to a missing file" if path.is_symlink() else "no such file") from None
    except OSError as exc:
        raise _Unreadable(exc.strerror or str(exc)) from None
    return _decode(data)


def _decode(data: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if not str(exc).startswith("unknown encoding"):
            raise
        raise _Unreadable(f"{exc}: fix its coding line (Python cannot run it either)") from None
    try:
        return data.decode(encoding)
    except (LookupError, ValueError, TypeError) as exc:  # `punycode` raises UnicodeError, `rot13` LookupError
        if isinstance(exc, UnicodeDecodeError) and encoding in ("utf-8", "utf-8-sig"):
            raise  # bytes UTF-8 cannot decode: a parse error, as Python reports it
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        raise _Unreadable(f"its coding line names {encoding!r}, which cannot decode it ({why}): "
                          "fix the coding line (Python cannot run it either)") from None


def _select_rules(rules) -> tuple[str, ...]:
    if rules is None:
        return tuple(r for r in R.RULES if r != "parse-error")
    names = [rules] if isinstance(rules, str) else list(rules)
    unknown = [r for r in names if r not in R.RULES]
    if unknown:
        raise ParameterError(f"unknown rule id(s) {', '.join(unknown)}: use some of {', '.join(R.RULES)}")
    return tuple(dict.fromkeys(names))


def _collect(paths) -> tuple[list[Path], list[str]]:
    """(files to scan, warnings about directories that could not be listed)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ParameterError("scan(paths=[]): pass at least one file or directory")
    files, warnings = [], []
    for item in map(Path, items):
        if item.is_dir():
            files.extend(_walk(item, warnings))
        elif os.path.lexists(item):  # a file, or a link whose trouble scan_file reports
            files.append(item)
        else:
            raise ParameterError(f"scan: {str(item)!r} does not exist: pass Python files or directories")
    return list(dict.fromkeys(files)), warnings


def _walk(root: Path, warnings: list) -> list[Path]:
    """The ``.py`` files under ``root`` in ``os.walk``'s order (sorted, top-down), walked with an
    explicit stack: a folder nested 1,200 deep overflowed ``os.walk``'s recursion. Symlinked folders
    are not entered; folders more than ``PERFKIT_MAX_NESTING_DEPTH`` below ``root`` are noted, not read."""
    limit = MAX_NESTING_DEPTH.value()
    found, too_deep, stack = [], [], [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"{folder}: directory not scanned: {exc.strerror or exc}")
            continue
        folders = []
        for entry in entries:
            if _is_folder(entry):
                if not entry.is_symlink() and not entry.name.startswith(".") and entry.name not in SKIP_DIRS:
                    folders.append(entry)
            elif entry.name.endswith(".py"):
                found.append(Path(entry.path))
        if folders and depth >= limit:
            too_deep.append(folder)
            continue
        stack.extend((Path(e.path), depth + 1) for e in reversed(folders))
    if too_deep:
        warnings.append(f"{too_deep[0]}: directory not scanned: " + MAX_NESTING_DEPTH.refusal(
            f"its folders are nested {limit + 1} levels below {root} ({len(too_deep):,} such place"
            f"{'s' * (len(too_deep) != 1)}; usually a link farm or a generated tree)"))
    return found


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows a link, as os.walk does: a link to a folder is not a file
    except OSError:
        return False


def prune_deep(tree: ast.AST, limit: int) -> list[int]:
    """Replace every expression or statement nested more than ``limit`` levels deep by a
    placeholder (the checker recurses about three frames per level and Python's stack holds
    ~1,000; real hand-written code stays under 100 levels); returns the sorted lines of the
    subtrees left unchecked. Iterative: any depth is safe here."""
    pruned, stack = [], [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for i, child in enumerate(children):
                if not isinstance(child, ast.AST):
                    continue
                if depth >= limit and isinstance(child, (ast.expr, ast.stmt)):
                    stub = ast.Constant(value=None) if isinstance(child, ast.expr) else ast.Pass()
                    children[i] = ast.copy_location(stub, child)
                    pruned.append(child.lineno)
                else:
                    stack.append((child, depth + 1))
            if not isinstance(value, list) and children[0] is not value:
                setattr(node, field, children[0])
    return sorted(set(pruned))


def _parse_error(path: str, exc: Exception) -> ScanFinding:
    line = getattr(exc, "lineno", None) or 1
    msg = getattr(exc, "msg", None) or str(exc)
    meta = R.RULES["parse-error"]
    return ScanFinding(path, line, "parse-error", f"{type(exc).__name__}: {msg}", meta.severity, meta.fix)


def _ignore_comments(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> rule ids silenced there (None: every rule)."""
    out = {}
    if "perfkit" not in source:  # tokenizing costs ~2 s per MB: only when a comment can match
        return out
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return out
    for tok in tokens:
        m = _IGNORE.search(tok.string)
        if m:
            ids = m.group(1)
            out[tok.start[0]] = None if ids is None else frozenset(i.strip() for i in ids.split(",") if i.strip())
    return out


def _ignored(ignores: dict, line: int, end: int, rule: str) -> bool:
    for ln in range(line, end + 1):
        if ln in ignores and (ignores[ln] is None or rule in ignores[ln]):
            return True
    return False
