"""``perfkit init DIR [--force]``: make a workbook in DIR: the investigation and case-study notebooks (as
.ipynb, for JupyterLab), a reports/ folder and a README stub. Runs started inside DIR (or with
PERFKIT_HOME=DIR) then write their reports and perf log there."""
from __future__ import annotations

from ..report.workbook_init import init_workbook
from .parsers import add_init


def register(subparsers) -> None:
    add_init(subparsers).set_defaults(func=run)


def run(args) -> int:
    written = init_workbook(args.folder, force=args.force)
    for path in written:
        print(path)
    print(f"{len(written)} file(s) written; open {args.folder}/notebooks in JupyterLab, or run `perfkit run` there")
    return 0
