"""The replies of ``perfkit mcp``'s tools about a whole trace or several (:mod:`perfkit.report.replies` has
the step investigations'): ``open_trace``, ``summary``, ``sql``, ``memory``, ``gpu_kernels``, ``ranks`` and
``trace_diff``, each read from the command's ``--json`` object."""
from __future__ import annotations

from .bounded import Lines, Reply, Table
from .reply_cells import findings, num, share, warnings


def open_trace_reply(d: dict) -> Reply:
    s = d["steps"]
    devices = ", ".join(d["devices"]) or "no GPU (host events only)"
    return Reply(f"{d['handle']}: {d['path']}, {num(d['bytes'])} bytes, {num(d['events'])} events, {s['count']} "
                 f"step(s) (median {num(s['median_us'])} us), {devices}", [
        Table("files", ("rank", "file", "events"), [(f["rank"], f["path"], num(f["events"])) for f in d["files"]],
              ranked_by="rank", source="the trace's files (sql: SELECT * FROM ranks)"),
        Table("steps", ("rank", "step", "start ts_us", "dur_us"),
              [(r["rank"], r["step"], f"{r['start_us']:.3f}", num(r["dur_us"])) for r in s["rows"]],
              ranked_by="start", source="sql: SELECT * FROM steps"),
        Lines("next", ["diagnose(handle): what limits the step and the fix; then the tool it names"],
              source="perfkit/_workbook/AGENTS.md"),
        warnings(d["warnings"])])


def summary_reply(d: dict) -> Reply:
    diag = d.get("diagnosis") or {}
    steps, gpu = d["steps"], d.get("gpu") or {}
    busy = f", GPU busy {num(gpu.get('busy_us'))} us" if gpu else ""
    return Reply(f"{d['trace']}: {num(d['events']['total'])} events, {steps['count']} step(s) (median "
                 f"{num(steps['median_us'])} us){busy}; {diag.get('title', 'no diagnosis')}", [
        Table("events by category", ("category", "events"),
              [(k, num(v)) for k, v in sorted(d["events"]["by_category"].items(), key=lambda kv: -kv[1])],
              ranked_by="count", source="sql: SELECT cat, count(*) FROM events GROUP BY cat ORDER BY 2 DESC"),
        Table("copies", ("direction", "count", "bytes", "time_us", "pageable", "pinned"),
              [(k, v["count"], num(v["bytes"]), num(v["time_us"]), v["pageable_count"], v["pinned_count"])
               for k, v in (d.get("memcpy") or {}).items() if v["count"]], ranked_by="direction",
              source="gpu_memcpy events (sql: SELECT name, count(*), sum(bytes) FROM events WHERE cat = "
                     "'gpu_memcpy' GROUP BY name)"),
        Lines("sync points", [_syncs_line(d)] if d.get("sync_points") else [],
              source=(d.get("sync_points") or {}).get("note", "")),
        Lines("next", [f"diagnose: {diag['fix']}"] if diag.get("fix") else [], source="the diagnosis's fix"),
        warnings(d["warnings"])])


def _syncs_line(d: dict) -> str:
    s = d["sync_points"]
    return f"{s['count']} sync point(s) blocking {num(s['blocked_us'])} us ({num(s['per_step'])} a step)"


def sql_reply(d: dict) -> Reply:
    cut = f" (the first {d['limit']:,}; more matched)" if d["limited"] else ""
    return Reply(f"{len(d['rows']):,} row(s){cut} x {len(d['columns'])} column(s) of: {d['query']}", [
        Table("rows", tuple(d["columns"]), [tuple(num(r[c]) if isinstance(r[c], float) else r[c]
                                                  for c in d["columns"]) for r in d["rows"]],
              ranked_by="the query's order", source="the query, over the views events, flows, steps and ranks"),
        warnings(d["warnings"])])


def memory_reply(d: dict) -> Reply:
    devices = sorted(d["devices"], key=lambda v: -(v["peak_bytes"] or 0))
    answer = (f"peak {num(devices[0]['peak_bytes'])} bytes on {devices[0]['device']} (rank {devices[0]['rank']}) "
              f"in step {devices[0]['peak_step']}, allocated by {devices[0]['peak_op'] or '-'}" if devices
              else "no memory timeline: " + (d["warnings"][0] if d["warnings"] else "no [memory] events"))
    return Reply(answer, [
        Table("devices", ("device", "rank", "peak_bytes", "peak_step", "peak_op", "peak_function", "growth/step",
                          "reserved peak"),
              [(v["device"], v["rank"], num(v["peak_bytes"]), v["peak_step"], v["peak_op"], v["peak_function"],
                num(v["growth_per_step_bytes"]), num(v["peak_reserved_bytes"])) for v in devices],
              ranked_by="peak_bytes", source="[memory] events' Total Allocated (sql: SELECT ts_us, alloc_bytes FROM "
                                             "events WHERE name = '[memory]' ORDER BY ts_us)"),
        Table("allocating ops", ("device", "op", "bytes", "calls"),
              [(v["device"], o["op"], num(o["bytes"]), o["count"]) for v in devices for o in v["top_ops"]],
              ranked_by="device, bytes", source="the op enclosing each [memory] event that allocated (sql: "
                                                "SELECT ts_us, alloc_bytes FROM events WHERE name = '[memory]')"),
        warnings(d["warnings"])])


def gpu_kernels_reply(d: dict) -> Reply:
    kernels = sorted(d["kernels"], key=lambda k: -k["total_us"])
    t = d["totals"]
    lead = d["findings"][0]["title"] if d["findings"] else (
        f"top kernel {kernels[0]['name']}: {share(kernels[0]['share'])} of GPU time" if kernels else "")
    answer = f"GPU busy {num(t.get('busy_us'))} us; MFU {share(t.get('mfu'))}; {lead}" if d["has_gpu"] \
        else "no GPU events in this trace: no kernels to break down"
    return Reply(answer, [
        findings(d["findings"]), warnings(d["warnings"]),
        Table("kernels", ("name", "calls", "total_us", "share", "class", "tensor_core", "dtype"),
              [(k["name"], k["calls"], num(k["total_us"]), share(k["share"]), k["class"], k["tensor_core"], k["dtype"])
               for k in kernels], ranked_by="total_us",
              source="kernel events by name (sql: SELECT name, count(*), sum(dur_us) FROM events WHERE cat = "
                     "'kernel' GROUP BY name ORDER BY 3 DESC)"),
        Table("ops", ("op", "family", "dtype", "calls", "kernel_us", "TFLOP/s", "GB/s", "% of peak", "bound"),
              [(o["op"], o["family"], o["dtype"], o["calls"], num(o["kernel_us"]), num(o["tflops_per_s"]),
                num(o["gbs"]), num(o["pct_of_peak"]), o["bound"]) for o in
               sorted(d["ops"], key=lambda o: -o["kernel_us"])], ranked_by="kernel_us",
              source=f"FLOPs and bytes from each op's input shapes, against {(d.get('device') or {}).get('source')}")])


def ranks_reply(d: dict) -> Reply:
    answer = d["findings"][0]["title"] if d["findings"] else f"{len(d['ranks'])} rank(s): no straggler found"
    return Reply(answer, [
        findings(d["findings"]),
        Table("ranks", ("rank", "steps", "median_step_us", "wait_us", "gpu_busy", "comm_us", "dataloader_us",
                        "sync_us", "file"),
              [(r["rank"], r["steps"], num(r["median_step_us"]), num(r["wait_us"]), f"{num(r['gpu_busy_pct'])}%",
                num(r["comm_us"]), num(r["dataloader_us"]), num(r["sync_us"]), r["file"]) for r in d["ranks"]],
              ranked_by="rank", source="each rank's ProfilerStep windows (sql: SELECT * FROM steps)"),
        Table("stragglers", ("rank", "step", "excess_us", "excess", "cause", "input_us", "host_us", "sync_us"),
              [(s["rank"], s["step"], num(s["excess_us"]), f"{num(s['excess_pct'])}%", s["cause"], num(s["input_us"]),
                num(s["host_us"]), num(s["sync_us"])) for s in sorted(d["stragglers"], key=lambda s: -s["excess_us"])],
              ranked_by="excess_us", source=f"own step time above the median rank's by > {num(d['straggler_pct'])}%"),
        Table("collectives", ("step", "name", "occurrence", "skew_us", "first_rank", "last_rank", "max_wait_us"),
              [(c["step"], c["name"], c["occurrence"], num(c["skew_us"]), c["first_rank"], c["last_rank"],
                num(c["max_wait_us"])) for c in sorted(d["collectives"], key=lambda c: -c["skew_us"])],
              ranked_by="skew_us", source="the same collective's kernel start on each rank (sql: SELECT rank, "
                                           "ts_us, dur_us FROM events WHERE cat = 'kernel' AND name LIKE 'nccl%' "
                                           "ORDER BY name, rank, ts_us)"),
        warnings(d["warnings"])])


def trace_diff_reply(d: dict) -> Reply:
    s = d["step_change"]
    tables = [Table(title, ("name", "status", "A per_step_us", "B per_step_us", "delta_per_step_us"),
                    [(r["name"], r["status"], num(r["per_step_us_a"]), num(r["per_step_us_b"]),
                      num(r["delta_per_step_us"])) for r in sorted(d[key], key=lambda r: -abs(r["delta_per_step_us"]))],
                    ranked_by="|delta_per_step_us|", source=f"{what} in A ({d['a']}) and B ({d['b']})")
              for title, key, what in (("host waits", "waits", "blocking calls"), ("ops", "ops", "cpu_op events"),
                                       ("kernels", "kernels", "kernel events"),
                                       ("ranges", "annotations", "record_function ranges"))]
    return Reply(f"B vs A: {s['verdict']}: median step {num(s['median_a_us'])} -> {num(s['median_b_us'])} us (B/A "
                 f"{num(s['ratio'])}, {s['reason']})", [
        findings(d["findings"]),
        Table("metrics", ("metric", "A", "B", "delta", "delta %"),
              [(m["metric"], num(m["a"]), num(m["b"]), num(m["delta"]), num(m["delta_pct"])) for m in d["metrics"]],
              ranked_by="the diff's order", source=f"A: {d['a']}; B: {d['b']}"),
        warnings(d["warnings"]), *tables])


TRACE_REPLIES = {"open_trace": open_trace_reply, "summary": summary_reply, "sql": sql_reply,
                 "memory": memory_reply, "gpu_kernels": gpu_kernels_reply, "ranks": ranks_reply,
                 "trace_diff": trace_diff_reply}
