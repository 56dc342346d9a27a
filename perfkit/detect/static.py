"""Static sync-point scanner: ``scan(paths) -> ScanReport`` reads Python source, never runs it.

Each rule (catalog in ``perfkit.detect.rules.RULES``) is a pattern in the AST that usually forces
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
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import ParameterError
from ..results import html_section, html_table, html_text, html_warnings
from . import rules as R
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
    not parse yields one ``parse-error`` finding. Raises ParameterError for a missing path or an
    unknown rule id.
    """
    selected = _select_rules(rules)
    files = _collect(paths)
    findings = []
    for path in files:
        findings.extend(f for f in scan_file(path) if f.rule in selected or f.rule == "parse-error")
    warnings = () if files else ("no Python files found under the given paths",)
    findings.sort(key=lambda f: (f.file, f.line, f.rule))
    return ScanReport(tuple(findings), tuple(str(p) for p in files), tuple(selected), warnings)


def scan_file(path) -> list[ScanFinding]:
    """Findings of every rule in one file, ignore comments applied."""
    path = str(path)
    try:
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source, filename=path)
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        return [_parse_error(path, exc)]
    ignores = _ignore_comments(source)
    out, seen = [], set()
    for line, end, rule, message in check_tree(tree):
        if (line, rule) in seen or _ignored(ignores, line, end, rule):
            continue
        seen.add((line, rule))
        meta = R.RULES[rule]
        out.append(ScanFinding(path, line, rule, message, meta.severity, meta.fix))
    return out


def _select_rules(rules) -> tuple[str, ...]:
    if rules is None:
        return tuple(r for r in R.RULES if r != "parse-error")
    names = [rules] if isinstance(rules, str) else list(rules)
    unknown = [r for r in names if r not in R.RULES]
    if unknown:
        raise ParameterError(f"unknown rule id(s) {', '.join(unknown)}: use some of {', '.join(R.RULES)}")
    return tuple(dict.fromkeys(names))


def _collect(paths) -> list[Path]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ParameterError("scan(paths=[]): pass at least one file or directory")
    files = []
    for item in map(Path, items):
        if item.is_file():
            files.append(item)
        elif item.is_dir():
            files.extend(_walk(item))
        else:
            raise ParameterError(f"scan: {str(item)!r} does not exist: pass Python files or directories")
    return list(dict.fromkeys(files))


def _walk(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return found


def _parse_error(path: str, exc: Exception) -> ScanFinding:
    line = getattr(exc, "lineno", None) or 1
    msg = getattr(exc, "msg", None) or str(exc)
    meta = R.RULES["parse-error"]
    return ScanFinding(path, line, "parse-error", f"{type(exc).__name__}: {msg}", meta.severity, meta.fix)


def _ignore_comments(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> rule ids silenced there (None: every rule)."""
    out = {}
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
