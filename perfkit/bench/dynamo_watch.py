"""What dynamo did while ``compile_ab`` ran: ``DynamoWatch`` resets dynamo, records compile ids
through dynamo's compile-start callbacks, and reads graph breaks (``torch._dynamo.graph_break_reasons``
with explanations from ``torch._dynamo.utils.counters``) and recompiles with their guard failures
(``torch._dynamo.guard_failures``), naming the user line behind each."""
from __future__ import annotations

import inspect
import re
from typing import Any

from .compile_ab_result import GraphBreak, Recompile

# torch is heavy and optional: the functions below import it when a compile A/B runs.

_COMPILE_ID = re.compile(r"^\[?(\d+)/(\d+)")
# Dynamo's guard failure text: "0/1: flag == False      # if flag:  # x.py:8 in forward (HINT: ...)",
# then "User stack trace:" and the frames of the line that installed the guard.
_GUARD_COMMENT = re.compile(r"\s{2,}#\s")
_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_HINT = re.compile(r"\(HINT: (?P<hint>.*)\)\s*$")
_DEBUG_CONTEXT = "Developer debug context: attempted to jump with "


class DynamoWatch:
    """Resets dynamo, records compile ids while active, reads dynamo's diagnostics, resets again."""

    def __enter__(self):
        import torch._dynamo
        from torch._dynamo.callback import callback_handler
        from torch._dynamo.utils import counters

        torch._dynamo.reset()  # also clears callback_handler, so register afterwards
        counters.clear()
        self.compile_ids: list[str] = []
        callback_handler.register_start_callback(self._on_compile)
        return self

    def _on_compile(self, args) -> None:
        # Lazy backward compiles reuse the forward's id; only dynamo frame compiles count.
        if args.callback_trigger.name == "DYNAMO" and str(args.compile_id) not in self.compile_ids:
            self.compile_ids.append(str(args.compile_id))

    def __exit__(self, *exc) -> bool:
        import torch._dynamo

        torch._dynamo.reset()
        return False

    def graph_breaks(self) -> tuple[GraphBreak, ...]:
        import torch._dynamo
        from torch._dynamo.utils import counters

        known = list(counters["unimplemented"]) + list(counters["graph_break"])
        seen: dict[tuple[str, str], GraphBreak] = {}
        for item in torch._dynamo.graph_break_reasons:
            brk = _graph_break(item, known)
            # A recompiled frame reports its breaks again: keep one per (reason, site).
            seen.setdefault((brk.reason, brk.location), brk)
        return tuple(seen.values())

    def recompiles(self, user: str = "") -> tuple[Recompile, ...]:
        """The recompiles seen; a frame of torch's own wrapper (external_utils' ``inner``) is named
        by ``user``, the compiled model's function, the line a person edits."""
        import torch._dynamo

        failures = {}
        for code, reasons in torch._dynamo.guard_failures.items():
            where = _code_text(code)
            if user and _in_torch(code.co_filename):
                where = user
            for reason in reasons:
                match = _COMPILE_ID.match(reason)
                if match:
                    failures.setdefault(match.groups(), (where, reason.split(":", 1)[1]))
        out = []
        for cid in self.compile_ids:
            match = _COMPILE_ID.match(cid)
            if match and int(match.group(2)) > 0:
                frame, n = match.group(1), int(match.group(2))
                where, text = failures.get((frame, str(n - 1)), ("frame " + frame, "unknown guard failure"))
                out.append(_recompile(cid, where, text))
        return tuple(out)


def _recompile(compile_id: str, function: str, text: str) -> Recompile:
    """Split dynamo's guard failure text into the guard, the user line that read it and the hint."""
    lines = text.strip().split("\n")
    head = lines[0].strip()
    hint = _HINT.search(head)
    reason = _GUARD_COMMENT.split(head, maxsplit=1)[0].strip()
    location = code = ""
    for i, line in enumerate(lines):
        frame = _USER_FRAME.match(line)
        # the last frame in the user's code read the guarded value; torch's own frames below it
        # (torch/_dynamo/external_utils.py calling the user's function) are not a line to edit
        if frame and not (location and _in_torch(frame["file"])):
            location = f"{frame['file']}:{frame['line']}"
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
    return Recompile(compile_id, function, reason, location, code, hint["hint"] if hint else "")


def _code_text(code) -> str:
    """'forward (/path/model.py:12)': a code object as dynamo names a frame."""
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def user_code(model) -> str:
    """The compiled model's own function (``forward`` of a module, else the callable) as
    ``_code_text``; for a module whose forward is torch's (``nn.Sequential``), "Sequential.forward";
    "" when it has no Python code object."""
    import torch

    fn = type(model).forward if isinstance(model, torch.nn.Module) else model
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return ""
    return f"{type(model).__name__}.forward" if _in_torch(code.co_filename) else _code_text(code)


def _in_torch(file: str) -> bool:
    """A frame of torch itself (an installed torch or a source checkout), not of the user's code."""
    return "/torch/" in file.replace("\\", "/")


def _graph_break(item: Any, known: list[str]) -> GraphBreak:
    frame = item.user_stack[-1] if item.user_stack else None
    location = f"{frame.filename}:{frame.lineno}" if frame else "unknown"
    lines = str(item.reason).strip().split("\n")
    title, detail = lines[0].strip(), "\n".join(lines[1:]).strip()
    if frame and (title.startswith("generic_jump") or not detail):
        text = _explanation(title, frame, known)
        if text:
            title, detail = text.split("\n")[0].strip(), "\n".join(text.split("\n")[1:]).strip()
    return GraphBreak(title, location, (frame.line or "").strip() if frame else "", detail)


def _explanation(title: str, frame, known: list[str]) -> str:
    """Dynamo's long explanation of a break: the one naming this file and line, else (for a
    bare ``if tensor:``, whose explanation names no line) the one whose debug context matches."""
    site = f'"{frame.filename}", line {frame.lineno}'
    for text in known:
        if site in text:
            return text
    if title.startswith("generic_jump "):
        context = _DEBUG_CONTEXT + title[len("generic_jump "):]
        return next((text for text in known if context in text), "")
    return ""
