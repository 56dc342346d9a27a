"""A ``perfkit mcp`` server started as a subprocess and driven with the MCP SDK's own stdio client
(``stdio_client`` and ``ClientSession``), from synchronous tests: the session lives on an event loop in a
thread of its own, and :meth:`Server.call` waits for each reply."""
from __future__ import annotations

import asyncio
import json
import sys
import threading
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

TIMEOUT_S = 600  # a call on the largest shared trace, on a loaded 2-core machine


class Server:
    """``perfkit mcp ARGS`` in ``cwd``, with ``env`` added to its environment."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict, budget: int = 4_000):
        self.budget = budget
        self.replies = 0  # calls answered, each checked against its budget
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.params = StdioServerParameters(command=sys.executable, args=["-m", "perfkit", "mcp", *args],
                                            cwd=str(cwd), env=env)
        self.ready, self.stop = threading.Event(), None
        self.owner = asyncio.run_coroutine_threadsafe(self._own(), self.loop)
        if not self.ready.wait(TIMEOUT_S):
            self.owner.result(0)  # raises what kept the session from starting
        self.owner.done() and self.owner.result()

    async def _own(self) -> None:
        """Open the session, hold it until :meth:`close`, close it: in one task, as anyio's scopes need."""
        self.stop = asyncio.Event()
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(stdio_client(self.params))
            self.session = await stack.enter_async_context(ClientSession(read, write))
            self.init = await self.session.initialize()
            self.ready.set()
            await self.stop.wait()

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT_S)

    def list_tools(self):
        return self._run(self.session.list_tools()).tools

    def call(self, tool: str, args: dict):
        """(text, is_error) of one call; its text, an error's too, within the call's budget (characters / 4)."""
        result = self._run(self.session.call_tool(tool, args))
        assert len(result.content) == 1 and result.content[0].type == "text"
        text = result.content[0].text
        budget = args.get("budget") if isinstance(args.get("budget"), int) and 500 <= args["budget"] <= 50_000 \
            else self.budget
        assert len(text) <= 4 * budget, (tool, len(text), budget)
        self.replies += 1
        return text, result.is_error

    def ok(self, tool: str, args: dict) -> str:
        text, error = self.call(tool, args)
        assert not error, text
        return text

    def json_pages(self, tool: str, args: dict) -> tuple[dict, list[str]]:
        """The whole JSON object of a ``format="json"`` answer, its pages' lists joined, and every page's text."""
        texts, cursor, whole = [], None, None
        while True:
            text = self.ok(tool, {**args, "format": "json", **({"cursor": cursor} if cursor else {})})
            texts.append(text)
            page = json.loads(text)
            whole = page["data"] if whole is None else _joined(whole, page["data"])
            cursor = page["more"]
            if cursor is None:
                return whole, texts

    def close(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.stop.set)
            self.owner.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def _joined(whole: dict, more: dict) -> dict:
    """``whole`` with ``more`` (a later page of a json reply) merged in: a key it lacks added, each list appended
    to the list at its place, each object merged the same way."""
    for key, value in more.items():
        if key not in whole:
            whole[key] = value
        elif isinstance(value, list):
            whole[key] = whole[key] + value
        else:
            _joined(whole[key], value)
    return whole
