"""``perfkit run [NAME...] [-p KEY VALUE]... [--out reports/] [--date YYYY-MM-DD]``: execute
investigation notebooks into dated HTML reports and rebuild the index."""
from __future__ import annotations

import re

from ..report.runner import INVESTIGATIONS, run_all

__all__ = ["INVESTIGATIONS", "register", "run", "parse_value"]

_INT = re.compile(r"^[+-]?\d+$")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run investigation notebooks into dated HTML reports",
        description="Execute notebooks with papermill into OUT/YYYY-MM-DD/<name>.ipynb and .html, "
                    f"then rebuild OUT/index.html. Without names: {', '.join(INVESTIGATIONS)} "
                    "(those present in notebooks/ or $PERFKIT_NOTEBOOK_DIR).")
    p.add_argument("names", nargs="*", metavar="NAME", help="notebook names or .ipynb paths")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], dest="parameters",
                   metavar=("KEY", "VALUE"),
                   help="notebook parameter; VALUE is read as int, float, True/False, None or text")
    p.add_argument("--out", default="reports", help="reports directory (default: reports)")
    p.add_argument("--date", default=None, help="report folder date YYYY-MM-DD (default: today)")
    p.add_argument("--notebook-dir", default=None, help="where to find notebooks by name")
    p.add_argument("--kernel", default=None, help="Jupyter kernel (default: python3 of this interpreter)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def parse_value(text: str):
    """A -p value as papermill's CLI reads it: int, float, bool, None, else the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", "~"):
        return None
    if _INT.match(text.strip()):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def run(args) -> int:
    params = {key: parse_value(value) for key, value in args.parameters}
    runs = run_all(args.names or None, params, out_dir=args.out, date=args.date,
                   kernel_name=args.kernel, progress=not args.no_progress,
                   notebook_dir=args.notebook_dir)
    for r in runs:
        print(f"{'ok' if r.ok else 'FAILED':<7} {r.name:<20} {r.duration_s:7.1f} s  {r.html_path or '-'}")
        if not r.ok:
            cell = f"cell {r.failed_cell_index}: " if r.failed_cell_index is not None else ""
            print(f"{'':<8}{cell}{r.error}")
        for w in r.warnings:
            print(f"{'':<8}warning: {w}")
    failed = sum(not r.ok for r in runs)
    print(f"{len(runs) - failed} ok, {failed} failed; index: {args.out.rstrip('/')}/index.html")
    return 1 if failed else 0
