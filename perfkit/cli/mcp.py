"""``perfkit mcp [--root DIR]... [--budget TOKENS]``: a Model Context Protocol server over stdio, for coding
agents: its tools call the analyses of the commands of the same name on traces under the roots, and every
reply fits the budget (docs/agents.md)."""
from __future__ import annotations

from ..agents.roots import Roots
from ..agents.server import serve
from ..report.bounded import check_budget
from .parsers import add_mcp


def register(subparsers) -> None:
    add_mcp(subparsers).set_defaults(func=run)


def run(args) -> int:
    serve(Roots(args.root), check_budget(args.budget))
    return 0
