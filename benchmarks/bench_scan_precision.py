"""Precision and recall of ``perfkit scan`` on the labeled fixtures, per rule and overall.

Usage: ``.venv/bin/python benchmarks/bench_scan_precision.py [FILE...]`` (default: every
``tests/fixtures/scan_*.py``). A labeled file marks true positives with a trailing comment
``# EXPECT: rule-id[, rule-id]``; every other (line, rule) reported is a false positive.
tests/test_syncs_static.py imports ``score`` from here, so the printed figures and the asserted
ones are computed the same way.
"""
from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_EXPECT = re.compile(r"#\s*EXPECT:\s*(.+)$")


def expected_labels(path) -> set[tuple[str, int, str]]:
    """(file, line, rule) for every ``# EXPECT:`` comment (comments only, not strings)."""
    source = Path(path).read_text(encoding="utf-8")
    labels = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        m = _EXPECT.search(tok.string) if tok.type == tokenize.COMMENT else None
        if m:
            labels.update((str(path), tok.start[0], r.strip()) for r in m.group(1).split(",") if r.strip())
    return labels


def score(paths) -> dict[str, dict[str, float]]:
    """Rule -> {tp, fp, fn, precision, recall}, plus "all"; precision/recall are 1.0 when undefined."""
    from perfkit.detect.static import scan

    paths = [str(p) for p in paths]
    expected = set().union(*(expected_labels(p) for p in paths))
    found = {(f.file, f.line, f.rule) for f in scan(paths).findings}
    rules = sorted({r for _, _, r in expected | found})
    table = {rule: _counts({e for e in expected if e[2] == rule}, {f for f in found if f[2] == rule}) for rule in rules}
    table["all"] = _counts(expected, found)
    return table


def _counts(expected: set, found: set) -> dict[str, float]:
    tp, fp, fn = len(expected & found), len(found - expected), len(expected - found)
    return {"tp": tp, "fp": fp, "fn": fn,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = args or sorted(str(p) for p in (ROOT / "tests" / "fixtures").glob("scan_*.py"))
    table = score(paths)
    print(f"{'rule':<22}{'tp':>4}{'fp':>4}{'fn':>4}{'precision':>11}{'recall':>8}")
    for rule, c in table.items():
        print(f"{rule:<22}{c['tp']:>4}{c['fp']:>4}{c['fn']:>4}{c['precision']:>11.3f}{c['recall']:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
