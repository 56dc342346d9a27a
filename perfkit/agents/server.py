"""``perfkit mcp``'s server: the MCP SDK's low-level ``Server`` over stdio, listing :data:`.tools.TOOLS` with
their input schemas and answering each call with the tool's bounded reply. A call runs in a worker thread,
one at a time (the open traces and their cached analyses are shared), so the server keeps reading requests
while an analysis runs. Any failure of a call is a tool error of one line, ``<tool>: error: <what to do>``;
the server goes on serving. The instructions it gives the client are ``perfkit/_workbook/AGENTS.md``.
"""
from __future__ import annotations

import sys
import threading
import traceback
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__
from ..errors import PerfkitError
from ..report.bounded import CHARS_PER_TOKEN, DEFAULT_BUDGET
from ..text import printable
from .handles import Handles
from .roots import Roots
from .tools import BY_NAME, TOOLS, run

AGENTS_MD = Path(__file__).resolve().parents[1] / "_workbook" / "AGENTS.md"
_READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def build_server(roots: Roots, budget: int = DEFAULT_BUDGET) -> Server:
    """The server over the traces under ``roots``, replying within ``budget`` tokens unless a call says otherwise."""
    handles, lock = Handles(roots), threading.Lock()
    listed = [types.Tool(name=t.name, description=t.description, input_schema=t.schema(budget),
                         annotations=_READ_ONLY) for t in TOOLS]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, error = await anyio.to_thread.run_sync(_answer, params.name, params.arguments, handles, lock, budget)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)

    return Server("perfkit", version=__version__, instructions=AGENTS_MD.read_text(encoding="utf-8"),
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _answer(name: str, args, handles: Handles, lock: threading.Lock, budget: int) -> tuple[str, bool]:
    """(reply, is_error) of the call of tool ``name`` with ``args``."""
    tool = BY_NAME.get(name)
    if tool is None:
        return _one_line(f"{name}: error: no such tool; the tools are {', '.join(BY_NAME)}", budget), True
    with lock:
        try:
            return run(tool, handles, {} if args is None else args, budget=budget), False
        except PerfkitError as exc:
            return _one_line(f"{name}: error: {exc}", budget), True
        except MemoryError:
            return _one_line(f"{name}: error: out of memory on this trace; close other traces (open at most "
                             f"{handles.max_open}) or ask a narrower question with sql", budget), True
        except Exception as exc:  # a bug: the agent gets one line, stderr (the client's log) the traceback
            traceback.print_exc(file=sys.stderr)
            return _one_line(f"{name}: error: perfkit failed ({type(exc).__name__}: {exc}); this is a bug in "
                             f"perfkit, the server goes on: try another tool or sql", budget), True


def _one_line(text: str, budget: int) -> str:
    line = " ".join(printable(text).split())
    most = min(budget * CHARS_PER_TOKEN, 2_000)
    return line if len(line) <= most else line[:most - 1] + "…"


async def _serve(server: Server) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve(roots: Roots, budget: int = DEFAULT_BUDGET) -> None:
    """Serve MCP over stdin and stdout until the client closes them."""
    anyio.run(_serve, build_server(roots, budget))
