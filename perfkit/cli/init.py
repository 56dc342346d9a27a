"""``perfkit init DIR [--force]``: make a workbook in DIR: the investigation and case-study notebooks (as
.ipynb, for JupyterLab), a reports/ folder and a README stub. Runs started inside DIR (or with
PERFKIT_HOME=DIR) then write their reports and perf log there."""
from __future__ import annotations

from ..report.workbook_init import init_workbook


def register(subparsers) -> None:
    p = subparsers.add_parser("init", help="make a workbook folder (notebooks, reports/, README)",
                              description="Copy perfkit's investigation notebooks, a reports/ folder and a "
                                          "README stub into DIR for editing in JupyterLab.")
    p.add_argument("folder", metavar="DIR", help="the workbook folder (created if missing)")
    p.add_argument("--force", action="store_true", help="overwrite files that already exist")
    p.set_defaults(func=run)


def run(args) -> int:
    written = init_workbook(args.folder, force=args.force)
    for path in written:
        print(path)
    print(f"{len(written)} file(s) written; open {args.folder}/notebooks in JupyterLab, or run `perfkit run` there")
    return 0
