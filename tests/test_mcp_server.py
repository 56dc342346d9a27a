"""``perfkit mcp`` as an agent meets it: the server started as a subprocess, driven with the MCP SDK's own stdio
client (tests/mcpclient.py). Each tool's answer equals the command's ``--json`` on shipped traces (the json form's
pages joined), the markdown equals ``--markdown``, every reply is within its budget (checked on each call), and
hostile calls get one-line tool errors while the server goes on serving."""
import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

from perfkit.cli import main
from tests.conftest import ROOT, shared_trace
from tests.mcpclient import Server

pytest.importorskip("mcp")

TRACES = ROOT / "data" / "traces"
GPU, CPU = "gpu/item_logging.pt.trace.json.gz", "cpu/mppi_float_tensor.json.gz"
TOOLS = {"open_trace", "diagnose", "whatif", "sync_points", "gaps", "gpu_kernels", "critical_path", "hotspots",
         "ranks", "trace_diff", "memory", "summary", "sql"}
ONE_TRACE = ("diagnose", "whatif", "sync_points", "gaps", "gpu_kernels", "critical_path", "hotspots", "summary")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mcp-cache")
    s = Server(["--root", str(TRACES)], cwd=ROOT, env={"PERFKIT_CACHE_DIR": str(cache)})
    yield s
    s.close()


@pytest.fixture(scope="module")
def handles(server):
    return {name: json.loads(server.ok("open_trace", {"path": name, "format": "json"}))["data"]["handle"]
            for name in (GPU, CPU, "ranks/ddp4_slow_dataloader", "gpu/copies_pageable.pt.trace.json.gz",
                         "gpu/copies_pinned.pt.trace.json.gz")}


def cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out.splitlines()[0]) if argv[0] == "summary" else json.loads(out)


def test_the_tools_are_listed_with_typed_parameters(server):
    tools = {t.name: t for t in server.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        props = tool.input_schema["properties"]
        assert tool.description and all(p["type"] in ("string", "integer") and p["description"] for p in props.values())
        assert {"format", "budget", "cursor"} <= set(props) and tool.input_schema["additionalProperties"] is False
        assert tool.annotations.read_only_hint is True
    assert tools["sql"].input_schema["required"] == ["handle", "query"]
    assert tools["trace_diff"].input_schema["required"] == ["a", "b"]
    assert tools["diagnose"].input_schema["properties"]["budget"]["default"] == 4000
    assert "open_trace(path)" in server.init.instructions  # AGENTS.md is what the client is told


@pytest.mark.parametrize("trace", [GPU, CPU])
@pytest.mark.parametrize("tool", ONE_TRACE)
def test_each_tool_answers_what_its_command_prints(server, handles, capsys, tool, trace):
    path = str((TRACES / trace).resolve())
    whole, pages = server.json_pages(tool, {"handle": handles[trace]})
    assert whole == cli_json(capsys, tool.replace("_", "-"), path)
    assert json.loads(pages[0])["answer"].split()[0] in server.ok(tool, {"handle": handles[trace]})


@pytest.mark.parametrize("trace", [GPU, CPU])
def test_memory_of_a_trace_without_memory_events_is_the_commands_error(server, handles, capsys, trace):
    """No shipped trace recorded memory: the tool says so in one line, as ``perfkit memory`` does, never an empty
    timeline (test_mcp_replies checks the answer on a trace with [memory] events)."""
    text, error = server.call("memory", {"handle": handles[trace]})
    assert main(["memory", str((TRACES / trace).resolve()), "--json"]) == 2
    assert error and "holds no [memory] events" in text and "\n" not in text.strip()
    assert text.split("holds no [memory] events")[1] in capsys.readouterr().err


def test_ranks_trace_diff_and_sql_answer_what_their_commands_print(server, handles, capsys):
    folder = str((TRACES / "ranks/ddp4_slow_dataloader").resolve())
    assert server.json_pages("ranks", {"handle": handles["ranks/ddp4_slow_dataloader"]})[0] == \
        cli_json(capsys, "ranks", folder)
    a, b = (str((TRACES / f"gpu/copies_{m}.pt.trace.json.gz").resolve()) for m in ("pageable", "pinned"))
    diffed, _ = server.json_pages("trace_diff", {"a": handles["gpu/copies_pageable.pt.trace.json.gz"],
                                                 "b": handles["gpu/copies_pinned.pt.trace.json.gz"]})
    assert diffed == cli_json(capsys, "trace-diff", a, b)
    query = "SELECT name, count(*) AS n, sum(dur_us) AS us FROM events WHERE cat = 'kernel' GROUP BY 1 ORDER BY 3 DESC"
    rows, _ = server.json_pages("sql", {"handle": handles[GPU], "query": query, "limit": 1000})
    assert main(["sql", query, str((TRACES / GPU).resolve()), "--json"]) == 0
    assert rows["rows"] == [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    with gzip.open(TRACES / GPU, "rt") as fh:  # counted from the raw JSON, without perfkit
        raw = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    assert rows["limited"] is False and len(rows["rows"]) == len({e["name"] for e in raw})
    assert sum(r["n"] for r in rows["rows"]) == len(raw)


def test_markdown_is_what_the_commands_print_with_markdown(server, handles, capsys):
    path = str((TRACES / GPU).resolve())
    for tool in ("diagnose", "gaps", "sync_points"):
        assert main([tool.replace("_", "-"), path, "--markdown", "--budget", "600"]) == 0
        printed = capsys.readouterr().out.rstrip("\n")
        assert server.ok(tool, {"handle": handles[GPU], "budget": 600}) == printed
    query = "SELECT name, count(*) AS n FROM events GROUP BY 1 ORDER BY 2 DESC, 1"
    assert main(["sql", query, path, "--markdown", "--budget", "600", "--limit", "50"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    assert server.ok("sql", {"handle": handles[GPU], "query": query, "limit": 50, "budget": 600}) == printed


def test_open_trace_counts_what_the_file_holds(server, handles, capsys):
    data = json.loads(server.ok("open_trace", {"path": GPU, "format": "json"}))["data"]
    summary = cli_json(capsys, "summary", str((TRACES / GPU).resolve()))
    assert data["bytes"] == (TRACES / GPU).stat().st_size
    with gzip.open(TRACES / GPU, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    assert data["events"] == summary["events"]["total"] == len(raw)
    assert data["steps"]["count"] == summary["steps"]["count"] == 3
    assert data["devices"] == ["NVIDIA H200"] and data["steps"]["median_us"] == summary["steps"]["median_us"]


def test_cursors_page_through_the_rest_and_only_their_own_answer(server, handles):
    text = server.ok("gaps", {"handle": handles[GPU], "budget": 500})
    cursor = text.rsplit('more: "', 1)[1].split('"')[0]
    shown = [line for line in text.splitlines() if line.startswith("| ") and "ts_us" not in line]
    pages = [text]
    while 'more: "' in pages[-1]:
        cursor = pages[-1].rsplit('more: "', 1)[1].split('"')[0]
        pages.append(server.ok("gaps", {"handle": handles[GPU], "budget": 500, "cursor": cursor}))
    gaps = [line for page in pages for line in page.splitlines() if line.startswith("| 7 ") or
            line.startswith("| 8 ") or line.startswith("| 9 ")]
    assert len(gaps) == 183 and len(set(gaps)) == len(gaps) and shown  # every gap once, none cut
    assert all(page.startswith("GPU idle") for page in pages)  # each page leads with the answer
    for wrong in ({"handle": handles[GPU], "cursor": cursor, "format": "json"},
                  {"handle": handles[CPU], "cursor": cursor}):
        message, error = server.call("gaps", wrong)
        assert error and "is not a place in this answer" in message
    message, error = server.call("hotspots", {"handle": handles[GPU], "cursor": cursor})
    assert error and "call hotspots without a cursor" in message


@pytest.mark.parametrize("tool, args, says", [
    ("open_trace", {"path": "/etc/passwd"}, "outside the folders this server reads"),
    ("open_trace", {"path": "../../README.md"}, "outside the folders this server reads"),
    ("open_trace", {"path": "gpu/../../../pyproject.toml"}, "outside the folders this server reads"),
    ("open_trace", {"path": "gpu/no_such.json.gz"}, "no such file or folder under"),
    ("open_trace", {"path": ""}, "give a trace file or folder as text"),
    ("open_trace", {"path": 7}, "is not a string"),
    ("open_trace", {}, "give path"),
    ("open_trace", {"path": "x" * 100_000}, "path is 100,000 characters long: give at most 4,096"),
    ("open_trace", {"path": "x" * 300 + "/t.json"}, "no such file or folder under"),  # a name past NAME_MAX
    ("open_trace", {"path": "/dev/zero"}, "outside the folders this server reads"),
    ("open_trace", {"path": "gpu/MANIFEST.json"}, "JSON has no 'traceEvents' list"),
    ("diagnose", {"handle": ["t1"]}, "is not a string"),
    ("diagnose", {"handle": "t1", "budget": True}, "is not an integer"),
    ("diagnose", {"handle": "t1", "cursor": "m" * 1_000}, "is not a place in this answer of diagnose"),
    ("gpu_kernels", {"handle": "t1", "device": "Z" * 5_000}, "device is 5,000 characters long"),
    ("hotspots", {"handle": "t1", "thread": "99999999"}, "thread '99999999' not found"),
    ("sql", {"handle": "t1", "query": "INSTALL httpfs"}, "SQL query failed"),
    ("diagnose", {"handle": "t99"}, "is not open"),
    ("diagnose", {"handle": "t1", "budget": 10**9}, "give a whole number of tokens from 500 to 50,000"),
    ("diagnose", {"handle": "t1", "budget": 10}, "give a whole number of tokens from 500 to 50,000"),
    ("diagnose", {"handle": "t1", "budget": "lots"}, "is not an integer"),
    ("diagnose", {"handle": "t1", "format": "yaml"}, "give one of markdown, json"),
    ("diagnose", {"handle": "t1", "verbose": True}, "no parameter 'verbose'"),
    ("sql", {"handle": "t1", "query": "SELECT * FROM events", "limit": 10**6}, "give 1 to 1,000 rows"),
    ("sql", {"handle": "t1", "query": "SELECT * FROM read_csv('/etc/passwd')"}, "SQL query failed"),
    ("sql", {"handle": "t1", "query": "COPY (SELECT 1) TO '/tmp/perfkit-mcp-x.csv'"}, "SQL query failed"),
    ("sql", {"handle": "t1", "query": "   "}, "the SQL query is empty"),
    ("memory", {"handle": "t1", "top": 10**9}, "give 1 to 100"),
    ("trace_diff", {"a": "t1", "b": "t1", "top": 0}, "give 1 to 1,000"),
    ("no_such_tool", {}, "no such tool; the tools are open_trace"),
])
def test_hostile_calls_are_one_line_tool_errors_and_the_server_goes_on(server, handles, tool, args, says):
    message, error = server.call(tool, args)
    assert error and says in message and "\n" not in message and "Traceback" not in message, message
    assert message.startswith(f"{tool}: error: ")
    assert not os.path.exists("/tmp/perfkit-mcp-x.csv")
    assert server.ok("summary", {"handle": handles[CPU]}).startswith("/")  # still serving


def test_a_query_past_its_time_is_stopped_and_the_server_goes_on(tmp_path):
    s = Server(["--root", str(TRACES)], cwd=tmp_path, env={"PERFKIT_CACHE_DIR": str(tmp_path / "cache"),
                                                           "PERFKIT_SQL_TIMEOUT_S": "2"})
    try:
        handle = json.loads(s.ok("open_trace", {"path": CPU, "format": "json"}))["data"]["handle"]
        message, error = s.call("sql", {"handle": handle, "query": "SELECT count(*) FROM range(1000000000000) a, "
                                                                   "range(1000000000000) b"})
        assert error and message.startswith("sql: error: the SQL query was stopped after 2 s (PERFKIT_SQL_TIMEOUT_S")
        assert s.ok("summary", {"handle": handle})
    finally:
        s.close()


def test_paths_that_leave_the_root_through_links_are_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "run").mkdir(parents=True)
    outside.mkdir()
    shutil.copy(TRACES / CPU, outside / "t.json.gz")
    shutil.copy(TRACES / CPU, root / "run" / "rank0.json.gz")
    (root / "out.json.gz").symlink_to(outside / "t.json.gz")
    (root / "run" / "rank1.json.gz").symlink_to(outside / "t.json.gz")
    (root / "up").symlink_to(outside)
    mine = root / "mine.json.gz"
    shutil.copy(TRACES / CPU, mine)
    s = Server(["--root", str(root)], cwd=tmp_path, env={"PERFKIT_CACHE_DIR": str(tmp_path / "cache")})
    try:
        for path, says in (("out.json.gz", "outside the folders"), ("up/t.json.gz", "outside the folders"),
                           ("run", "its file rank1.json.gz links to"), (str(outside / "t.json.gz"), "outside")):
            message, error = s.call("open_trace", {"path": path})
            assert error and says in message, message
        handle = json.loads(s.ok("open_trace", {"path": "mine.json.gz", "format": "json"}))["data"]["handle"]
        assert s.ok("diagnose", {"handle": handle})
        with open(mine, "ab") as fh:  # the trace changes under the open handle
            fh.write(b"\n")
        message, error = s.call("diagnose", {"handle": handle})
        assert error and "changed (or went) since open_trace('mine.json.gz')" in message
        message, error = s.call("gaps", {"handle": handle})
        assert error and "is not open" in message  # the stale handle is closed
        shutil.copy(TRACES / CPU, mine)
        again = json.loads(s.ok("open_trace", {"path": "mine.json.gz", "format": "json"}))["data"]["handle"]
        assert again != handle and s.ok("diagnose", {"handle": again})
    finally:
        s.close()


def test_malformed_requests_get_errors_and_the_server_goes_on(tmp_path):
    """Raw JSON-RPC lines, as a broken client would send them: text that is not JSON, a call whose params are a
    string (the SDK drops both: no id to answer, or not a request), a call without its arguments (a tool error),
    one whose arguments are a list (invalid params); the requests after them are served."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    lines = ["this is not json {", _rpc(1, "initialize", init),
             '{"jsonrpc": "2.0", "method": "notifications/initialized"}', _rpc(2, "tools/call", "not an object"),
             _rpc(3, "tools/call", {"name": "diagnose"}), _rpc(4, "tools/call", {"name": "gaps", "arguments": [1, 2]}),
             _rpc(5, "tools/list", {})]
    env = {**os.environ, "PERFKIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "perfkit", "mcp", "--root", str(TRACES)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        replies = {}
        while 5 not in replies:  # stdin stays open until the last reply: at its end the server stops serving
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            reply = json.loads(line)
            replies[reply.get("id")] = reply
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        proc.kill() if proc.poll() is None else None
    assert replies[1]["result"]["serverInfo"]["name"] == "perfkit" and 2 not in replies
    assert replies[3]["result"]["isError"] and replies[3]["result"]["content"][0]["text"] == \
        "diagnose: error: give handle (the handle open_trace returned (t1, t2, ...))"
    assert replies[4]["error"]["code"] == -32602  # JSON-RPC's invalid params
    assert len(replies[5]["result"]["tools"]) == len(TOOLS)
    assert "Traceback" not in proc.stderr.read()


def _rpc(id_: int, method: str, params) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


LARGEST = [("data", "gpu/ppo_sync_checks.json.gz"), ("shared", "tracelens_mi300x_xdit_sd35_compiled.json.gz"),
           ("shared", "hta_df_index_resolver__df_index_resolver.json.gz")]


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("where, name", LARGEST)
def test_every_reply_fits_its_budget_on_the_largest_traces(tmp_path, where, name):
    """Every tool, markdown and json, its first page and the next, at the default budget and the smallest: on
    the largest shipped trace and the largest shared ones (the client checks each reply's length)."""
    path = TRACES / name if where == "data" else shared_trace(name)
    s = Server(["--root", str(TRACES), "--root", str(path.parent)], cwd=tmp_path,
               env={"PERFKIT_CACHE_DIR": str(tmp_path / "cache")})
    try:
        handle = json.loads(s.ok("open_trace", {"path": str(path), "format": "json"}))["data"]["handle"]
        for tool in (*ONE_TRACE, "ranks", "trace_diff", "sql"):
            args = {"a": handle, "b": handle} if tool == "trace_diff" else {"handle": handle}
            if tool == "sql":
                args["query"], args["limit"] = "SELECT name, ts_us, dur_us FROM events ORDER BY dur_us DESC", 1000
            for form in ("markdown", "json"):
                for budget in (4_000, 500):
                    text = s.ok(tool, {**args, "format": form, "budget": budget})
                    cursor = json.loads(text)["more"] if form == "json" else \
                        text.rsplit('more: "', 1)[1].split('"')[0] if 'more: "' in text else None
                    if cursor:
                        s.ok(tool, {**args, "format": form, "budget": budget, "cursor": cursor})
        assert s.replies >= 4 * 12
    finally:
        s.close()


def test_the_session_in_docs_agents_md_is_what_the_server_answers(server, handles):
    """Each call of docs/agents.md's session that succeeded there gets the same reply from the server now (paths
    shortened as the page shortens them; t1 is the same trace here)."""
    assert handles[GPU] == "t1"
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8").split("```text\n", 1)[1].split("```", 1)[0]
    calls = 0
    for chunk in text.split("→ call_tool(")[1:]:
        head, status, *reply = chunk.rstrip("\n").splitlines()
        tool, args = head.split(", ", 1)
        if status.startswith("← isError") or json.loads(tool) == "open_trace":  # a new handle each time
            continue
        got = server.ok(json.loads(tool), json.loads(args[:-1])).replace(f"{ROOT}/", "")
        assert got == "\n".join(reply)  # (its length in characters, there, is before the paths were shortened)
        calls += 1
    assert calls == 4
