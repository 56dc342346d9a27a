"""What each ``perfkit mcp`` tool answers, laid out as a bounded :class:`~perfkit.report.bounded.Reply`: the
one-line answer, then tables ranked so that a page keeps the rows that matter, each saying where its figures
come from (the step, the event name and its ``ts``, the rule and threshold that decided) and how to check
them with ``sql``. The same text is what ``perfkit <command> --markdown`` prints. Each builder reads the
command's ``--json`` object, so the two never disagree; :func:`reply_text` is the entry point.
"""
from __future__ import annotations

from .bounded import DEFAULT_BUDGET, Lines, Reply, Table, digest, json_page, page
from .replies_traces import TRACE_REPLIES
from .reply_cells import diagnosis, findings, num, share, site, ts, warnings


def reply_text(tool: str, data, *, budget: int = DEFAULT_BUDGET, cursor: str | None = None,
               form: str = "markdown") -> str:
    """The page of ``tool``'s answer ``data`` (its ``--json`` object) from ``cursor`` on, within ``budget``
    tokens: markdown (``form="markdown"``) or the JSON object cut by rows (``form="json"``). Raises
    ParameterError for a cursor of another answer."""
    reply = REPLIES[tool](data)
    answer_digest = digest(f"{tool}:{form}", data)
    if form == "json":
        sources = {block.title: block.source for block in reply.blocks
                   if block.source and (block.rows if isinstance(block, Table) else block.lines)}
        return json_page(reply.answer, data, tool=tool, answer_digest=answer_digest, budget=budget, cursor=cursor,
                         sources=sources)
    return page(reply, tool=tool, answer_digest=answer_digest, budget=budget, cursor=cursor)


def diagnose_reply(d: dict) -> Reply:
    prediction = d.get("prediction") or {}
    answer = f"{d['title']}. {prediction.get('sentence') or ''}".strip()
    steps = Table("steps", ("rank", "step", "verdict", "wall_us", "gpu_busy", "sync", "dataloader", "python"),
                  [(s["rank"], s["step"], s["verdict"], num(s["wall_us"]), share(s["shares"].get("gpu_busy")),
                    share(s["shares"].get("sync")), share(s["shares"].get("dataloader")),
                    share(s["shares"].get("python"))) for s in d["steps"]],
                  ranked_by="step", source="each ProfilerStep window (sql: SELECT * FROM steps)")
    return Reply(answer, [
        Lines("verdict", [f"{e['text']}" for e in d["evidence"]],
              source=f"decided by {d['decided_by']}: {d['rule']}"),
        Lines("fix", [d["fix"]], source=prediction.get("assumes") or ""),
        steps, findings(d["findings"]),
        Lines("next", [_next(d["command"])] if d.get("command") else [], source="the command that shows the cause"),
        warnings(d["warnings"])])


def _next(command: str) -> str:
    """The tool of the command that shows the cause, beside the command itself (``perfkit sync-points PATH``)."""
    words = command.split()
    tool = words[1].replace("-", "_") if len(words) > 1 and words[0] == "perfkit" else ""
    return f"{tool}(handle); on the command line: {command}" if tool in REPLIES else command


def whatif_reply(d: dict) -> Reply:
    err = d["replay_error"]
    fixes = sorted(d["fixes"], key=lambda f: -(f.get("saving_us") or 0))
    prediction = d.get("prediction") or {}
    return Reply(prediction.get("sentence") or f"{d['verdict']}: {d['rule']}", [
        Table("fixes", ("fix", "cause", "applies", "predicted_step_us", "saving_us", "speedup", "share", "assumes"),
              [(f["fix"], f.get("cause"), f.get("applies"), num(f.get("predicted_step_us")), num(f.get("saving_us")),
                num(f.get("speedup")), share(f.get("share")), f.get("assumes") or f.get("reason") or "")
               for f in fixes],
              ranked_by="saving_us", source=f"each fix replayed on the steps' dependency graph; median step "
                                            f"{num(d['step_us'])} us; replay error median {share(err['median'])}, "
                                            f"p90 {share(err['p90'])}, worst {share(err['worst'])}"),
        Lines("all fixes together", [_fix_line(d["all_fixes"])] if d.get("all_fixes") else [],
              source="every fix that applies, in one replay of the steps' dependency graph"),
        Lines("verdict", [f"{d['verdict']}: {d['rule']}"], source=f"decided by {d.get('decided_by')}"),
        Table("replay per step", ("rank", "step", "wall_us", "replay_us", "error"),
              [(s["rank"], s["step"], num(s["wall_us"]), num(s["replay_us"]), share(s["error"])) for s in d["steps"]],
              ranked_by="step", source="wall_us: the ProfilerStep window (sql: SELECT * FROM steps)"),
        Lines("not modeled", d.get("not_modeled") or [], source="causes no fix models: the replay keeps their time"),
        warnings(d["warnings"])])


def _fix_line(f: dict) -> str:
    return (f"{f['assumes']}: {num(f['predicted_step_us'])} us a step, saving {num(f['saving_us'])} us "
            f"({num(f['speedup'])}x)")


# blocked_us is the duration of the op that holds the blocking call (the call's own where there is no op)
_SYNC_SOURCE = ("blocked_us: the op holding the blocking call, as long as it lasted (sql: SELECT o.name, count(*), "
                "sum(o.dur_us) FROM events o JOIN events c ON c.rank = o.rank AND c.tid = o.tid AND c.ts_us >= o.ts_us "
                "AND c.ts_us + c.dur_us <= o.ts_us + o.dur_us WHERE o.cat = 'cpu_op' AND c.cat = 'cuda_runtime' AND "
                "c.name LIKE '%Synchronize%' GROUP BY 1 ORDER BY 3 DESC); with no op, the call itself")


def sync_points_reply(d: dict) -> Reply:
    t = d["total"]
    sites = sorted(d["sites"], key=lambda s: -(s.get("blocked_us") or 0))
    top = f"; most at {site(sites[0])} ({sites[0]['op']}, {num(sites[0]['blocked_us'])} us)" if sites else ""
    reads = d["host_scalar_reads"]
    return Reply(f"{t['count']} sync point(s) blocked the host {num(t['blocked_us'])} us over {t['steps']} step(s) "
                 f"({num(t['per_step'])} a step){top}", [
        Table("sync points", ("kind", "op", "call", "where", "count", "blocked_us", "per_step", "gpu_confirmed"),
              [(s["kind"], s["op"], s["call"], site(s), s["count"], num(s["blocked_us"]), num(s["per_step"]),
                s["gpu_confirmed"]) for s in sites], ranked_by="blocked_us",
              source=_SYNC_SOURCE),
        findings(d["findings"]), Lines("where file:line points", [d["source_lines"]] if d.get("source_lines") else [],
                                       source="the python_function events enclosing each sync"),
        warnings(d["warnings"]),
        Table("host scalar reads that did not wait (not counted)", ("kind", "op", "where", "count", "host_us"),
              [(s["kind"], s["op"], site(s), s["count"], num(s["host_us"])) for s in reads["sites"]],
              ranked_by="host_us", source="ops that read a scalar without a blocking call under them")])


def gaps_reply(d: dict) -> Reply:
    totals = sorted(d["totals"].items(), key=lambda kv: -kv[1]["dur_us"])
    idle = sum(v["dur_us"] for _, v in totals)
    lead = f"; most {totals[0][0]} {num(totals[0][1]['dur_us'])} us ({share(totals[0][1]['share'])})" \
        if totals and idle else ""
    answer = (f"GPU idle {num(idle)} us in {sum(v['count'] for _, v in totals)} gap(s){lead}" if d["has_gpu"]
              else "no GPU events in this trace: no GPU gaps to find")
    rows = sorted(d["rows"], key=lambda r: -r["dur_us"])
    return Reply(answer, [
        Table("idle by class", ("class", "count", "dur_us", "share"),
              [(k, v["count"], num(v["dur_us"]), share(v["share"])) for k, v in totals], ranked_by="dur_us",
              source="GPU idle inside the steps, each gap classified by the host work that spans it"),
        findings(d["findings"]),
        diagnosis(d.get("diagnosis")),
        warnings(d["warnings"]),
        Table("gaps", ("step", "start ts_us", "dur_us", "class", "function", "where", "rank", "device"),
              [(r["step"], ts(r["start_us"]), num(r["dur_us"]), r["class"], r["function"], site(r), r["rank"],
                r["device"]) for r in rows], ranked_by="dur_us",
              source="a gap starts where the GPU's last event ended (sql: SELECT name, ts_us, dur_us FROM events "
                     "WHERE device IS NOT NULL AND ts_us + dur_us <= <start ts_us> ORDER BY ts_us + dur_us DESC "
                     "LIMIT 1)")])


def critical_path_reply(d: dict) -> Reply:
    t = d["total"]
    kinds = sorted(t["by_kind"].items(), key=lambda kv: -kv[1])
    lead = f"; most {kinds[0][0]} {num(kinds[0][1])} us ({share(kinds[0][1] / t['path_us'])})" \
        if kinds and t["path_us"] else ""
    return Reply(f"critical path {num(t['path_us'])} us over {t['steps']} step(s) of {num(t['wall_us'])} us{lead}", [
        Table("path by kind", ("kind", "us", "share of path"),
              [(k, num(v), share(v / t["path_us"] if t["path_us"] else None)) for k, v in kinds], ranked_by="us",
              source="the chain of host work, launches, kernels, copies and sync waits that ends each step last"),
        Table("steps", ("rank", "step", "start ts_us", "wall_us", "path_us", "bound_by", "verdict", "why"),
              [(s["rank"], s["step"], ts(s["start_us"]), num(s["wall_us"]), num(s["path_us"]), s["bound_by"],
                s["verdict"], s["why"]) for s in d["steps"]], ranked_by="step",
              source="each ProfilerStep window (sql: SELECT * FROM steps)"),
        diagnosis(d.get("diagnosis")),
        warnings(d["warnings"])])


def hotspots_reply(d: dict) -> Reply:
    rows = sorted(d["rows"], key=lambda r: -r["self_us"])
    answer = (f"{rows[0]['function']} ({site(rows[0])}) spends most host time: {num(rows[0]['self_us'])} us self, "
              f"{num(rows[0]['per_step_us'])} us a step" if rows else "no Python function events in this thread "
              "(record with with_stack=True)")
    return Reply(answer, [
        Table("threads", ("thread", "main", "python", "frames", "covered_us", "self_us", "waiting_us", "steps"),
              [(t["thread"], t["main"], t["python"], t["frames"], num(t["covered_us"]), num(t["self_us"]),
                num(t["waiting_us"]), t["steps"]) for t in d["threads"]], ranked_by="the trace's order",
              source="python_function events by thread (sql: SELECT tid, count(*), sum(dur_us) FROM events WHERE cat = "
                     "'python_function' GROUP BY tid)"),
        warnings(d["warnings"]),
        Table("functions", ("function", "where", "self_us", "total_us", "calls", "per_step_us", "waiting", "thread"),
              [(r["function"], site(r), num(r["self_us"]), num(r["total_us"]), r["calls"], num(r["per_step_us"]),
                r["waiting"], r["thread"]) for r in rows], ranked_by="self_us",
              source="python_function events, self time: their duration less their children's (sql: SELECT name, "
                     "count(*), sum(dur_us) FROM events WHERE cat = 'python_function' GROUP BY name)")])


REPLIES = {"diagnose": diagnose_reply, "whatif": whatif_reply, "sync_points": sync_points_reply,
           "gaps": gaps_reply, "critical_path": critical_path_reply, "hotspots": hotspots_reply, **TRACE_REPLIES}
