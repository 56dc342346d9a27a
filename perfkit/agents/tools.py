"""The tools of ``perfkit mcp``: each one's parameters (their JSON Schema types, checked here, so a bad one is
one line saying what to give), and a thin call into the analysis that ``perfkit <tool> --json`` makes, whose
object :func:`perfkit.report.replies.reply_text` lays out within the budget. Every tool takes ``format``
("markdown", or "json": the command's ``--json`` object cut by rows), ``budget`` (tokens) and ``cursor`` (from
the ``more:`` line of the previous page)."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.answers import critical_path_answer, gaps_answer, whatif_answer
from ..analysis.gpu_kernels import kernels
from ..analysis.memory import recorded_memory
from ..analysis.ranks.combine import ranks
from ..analysis.sql import ANSWER_MAX_ROWS, ANSWER_ROWS, sql_answer
from ..analysis.step.diagnosis import diagnose
from ..analysis.step.hotspots import hotspots
from ..analysis.summary import summarize
from ..analysis.sync_points.find import syncs
from ..analysis.trace_diff.diff import diff
from ..errors import ParameterError
from ..report.bounded import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, check_budget
from ..report.replies import reply_text
from .handles import Handles, describe

# the longest text a parameter takes: a query, and anything else (a path: Linux's PATH_MAX)
MAX_QUERY_CHARS, MAX_TEXT_CHARS = 100_000, 4_096
_TYPES = {"string": str, "integer": int}
HANDLE = ("handle", "string", "the handle open_trace returned (t1, t2, ...)")
COMMON = {
    "format": ("string", "markdown (default): the answer laid out for reading; json: the command's --json object, "
                         "its lists cut to the budget", ("markdown", "json")),
    "budget": ("integer", f"the most tokens (characters / 4) the reply may hold, {MIN_BUDGET:,} to {MAX_BUDGET:,}"),
    "cursor": ("string", "the cursor of a previous reply's `more:` line, for the rest of the same answer"),
}


@dataclass(frozen=True)
class Tool:
    """One tool: ``params`` maps a name to (JSON type, description, allowed values or None, default);
    ``call(handles, args) -> dict`` is the command's ``--json`` object."""

    name: str
    description: str
    params: dict
    required: tuple
    call: object

    def schema(self, budget: int = DEFAULT_BUDGET) -> dict:
        """The tool's input schema: each parameter's type, description, allowed values and default (``budget``:
        the server's default budget)."""
        props = {}
        for name, (kind, text, allowed, default) in {**self.params, **_common(budget)}.items():
            props[name] = {"type": kind, "description": text, **({"enum": list(allowed)} if allowed else {}),
                           **({} if default is None else {"default": default})}
        return {"type": "object", "properties": props, "required": list(self.required), "additionalProperties": False}


def _common(budget: int) -> dict:
    fmt, size, cursor = COMMON["format"], COMMON["budget"], COMMON["cursor"]
    return {"format": (*fmt, "markdown"), "budget": (*size, None, budget), "cursor": (*cursor, None, None)}


def _handle_tool(name, description, call, required=(), **params) -> Tool:
    return Tool(name, description, {"handle": (*HANDLE[1:], None, None), **params}, ("handle", *required), call)


def run(tool: Tool, handles: Handles, args, *, budget: int = DEFAULT_BUDGET) -> str:
    """The reply of ``tool`` called with ``args``: its page within the budget. Raises ParameterError (an
    unknown or badly typed parameter, a handle not open, ...) and the analyses' PerfkitErrors."""
    args = checked(tool, args, budget)
    data = tool.call(handles, args)
    return reply_text(tool.name, data, budget=check_budget(args["budget"]), cursor=args["cursor"],
                      form=args["format"])


def checked(tool: Tool, args, budget: int) -> dict:
    """``args`` with every parameter of ``tool`` present (defaults filled in), each of its type and allowed
    values. Raises ParameterError naming the first one that is not."""
    if not isinstance(args, dict):
        raise ParameterError('give the arguments as an object, e.g. {"handle": "t1"}')
    params = {**tool.params, **_common(budget)}
    unknown = sorted(set(args) - set(params))
    if unknown:
        raise ParameterError(f"no parameter {unknown[0]!r:.40}; it takes {', '.join(params)}")
    out = {}
    for name, (kind, _, allowed, default) in params.items():
        value = args.get(name, default)
        if value is None and name in tool.required:
            raise ParameterError(f"give {name} ({params[name][1]})")
        if value is not None and (not isinstance(value, _TYPES[kind]) or isinstance(value, bool)):
            raise ParameterError(f"{name}={value!r:.40} is not {'an' if kind[0] == 'i' else 'a'} "
                                 f"{kind}; give {params[name][1]}")
        most = MAX_QUERY_CHARS if name == "query" else MAX_TEXT_CHARS
        if isinstance(value, str) and len(value) > most:
            raise ParameterError(f"{name} is {len(value):,} characters long: give at most {most:,}")
        if allowed and value not in allowed:
            raise ParameterError(f"{name}={value!r:.40}: give one of {', '.join(allowed)}")
        out[name] = value
    return out


def _sql(handles: Handles, a: dict) -> dict:
    return sql_answer(a["query"], handles.get(a["handle"]).trace, limit=a["limit"])


def _trace(handles: Handles, a: dict):
    return handles.get(a["handle"]).trace


def _path(handles: Handles, a: dict) -> str:
    return str(handles.get(a["handle"]).path)


def _positive(name: str, value: int, most: int) -> int:
    if not 1 <= value <= most:
        raise ParameterError(f"{name}={value:,}: give 1 to {most:,}")
    return value


TOOLS = [
    Tool("open_trace", "Open a PyTorch profiler trace (a .json/.json.gz file, or a folder of per-rank traces) under "
                       "the server's roots; returns a handle for the other tools, and the trace's size, devices, "
                       "steps and warnings. Call it first.",
         {"path": ("string", "the trace file or folder, relative to the server's root", None, None)}, ("path",),
         lambda h, a: describe(h.open(a["path"]))),
    _handle_tool("diagnose", "What limits the step (the verdict), the numbers behind it, the fix and the step time it "
                             "buys. Start here.",
                 lambda h, a: diagnose(_trace(h, a), path=_path(h, a)).to_json()),
    _handle_tool("whatif", "Every fix perfkit models, replayed on the trace's steps and ranked by the step time it "
                           "saves; the replay's error per step.",
                 lambda h, a: whatif_answer(_trace(h, a), path=_path(h, a))),
    _handle_tool("sync_points", "Where the host waited on the GPU: each sync point's op, blocking call, file:line, "
                                "count per step and time blocked.", lambda h, a: syncs(_trace(h, a)).to_json()),
    _handle_tool("gaps", "GPU idle intervals per step, each classified (input, launch, sync_wait, host_python, "
                         "compile, other_stream, tail) with the function behind it and its start ts.",
                 lambda h, a: gaps_answer(_trace(h, a))),
    _handle_tool("gpu_kernels", "GPU time by kernel and op: class, Tensor Cores, dtype, FLOPs and bytes against the "
                                "device's peaks, MFU, findings with fixes.",
                 lambda h, a: kernels(_trace(h, a), device=a["device"]).to_json(),
                 device=("string", "a GPU to compare against instead of the trace's (H100-SXM, A100-80GB, MI300X)",
                         None, None)),
    _handle_tool("critical_path", "The chain of host work, launches, kernels, copies and sync waits that bounds each "
                                  "step, and its time by kind.",
                 lambda h, a: critical_path_answer(_trace(h, a), annotation=a["annotation"]),
                 annotation=("string", "a record_function label whose instances are the steps instead", None, None)),
    _handle_tool("hotspots", "Host time by Python function: self, total, calls, per step.",
                 lambda h, a: hotspots(_trace(h, a), thread=a["thread"]).to_json(),
                 thread=("string", "'main' (the thread launching the most GPU work), 'all', or a thread id", None,
                         "main")),
    _handle_tool("ranks", "Per-rank step time, GPU busy, compute vs comm, DataLoader, waits for peers, stragglers "
                          "and collective arrival skew of a multi-rank run (a handle on a folder of rank traces).",
                 lambda h, a: ranks(_path(h, a)).to_json()),
    Tool("trace_diff", "What changed from trace a (baseline) to trace b: step time with a confidence interval, ops, "
                       "kernels, ranges, copies, waits.",
         {"a": ("string", "the baseline's handle", None, None), "b": ("string", "the candidate's handle", None, None),
          "top": ("integer", "ops, kernels and ranges to list (1 to 1,000)", None, 10)}, ("a", "b"),
         lambda h, a: diff(h.get(a["a"]).trace, h.get(a["b"]).trace).to_json(top=_positive("top", a["top"], 1_000))),
    _handle_tool("memory", "Memory over time per device (a trace recorded with profile_memory=True): peak and what "
                           "allocated it, memory at each step's end, growth per step, the top allocating ops.",
                 lambda h, a: recorded_memory(_trace(h, a), top=_positive("top", a["top"], 100)).to_json(),
                 top=("integer", "allocating ops listed per device (1 to 100)", None, 5)),
    _handle_tool("summary", "Counts of the whole trace: events by category, steps, GPU time, copies, syncs, compile, "
                            "the verdict.", lambda h, a: summarize(_trace(h, a))),
    _handle_tool("sql", "DuckDB SQL over the trace's views: events (name, cat, ph, ts_us, dur_us, pid, tid, rank, "
                        "device, stream, correlation, external_id, bytes, ...), flows, steps (rank, step, start_us, "
                        "end_us, dur_us), ranks. Read-only: the query sees these views and no file.", _sql,
                 required=("query",),
                 query=("string", "one SELECT, e.g. SELECT name, sum(dur_us) FROM events WHERE cat = 'kernel' "
                                  "GROUP BY 1 ORDER BY 2 DESC", None, None),
                 limit=("integer", f"rows returned at most (1 to {ANSWER_MAX_ROWS:,})", None, ANSWER_ROWS)),
]
BY_NAME = {tool.name: tool for tool in TOOLS}
