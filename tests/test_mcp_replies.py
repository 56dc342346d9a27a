"""The bounded replies of ``perfkit mcp`` (perfkit/report/bounded.py, replies.py) without a server: a page
fits its budget, leads with the answer, keeps rows whole and ends with the cursor of the rest; the pages of a
cursor hold every row once; json pages merge back into the whole object; every block of every tool's answer
on shipped traces says where its figures come from, and each ``sql:`` it names runs on that trace."""
import json
import re

import pytest

from perfkit.analysis.sql import sql
from perfkit.cli import main
from perfkit.errors import ParameterError
from perfkit.report.bounded import Lines, Reply, Table, digest, json_page, page
from perfkit.report.replies import REPLIES
from perfkit.trace import load_trace
from tests.conftest import ROOT, SHARED_TRACES

TRACES = ROOT / "data" / "traces"
GPU = "gpu/item_logging.pt.trace.json.gz"
# a trace with [memory] events (profile_memory=True); no shipped one has them, so without ../shared the memory
# answer is checked on a trace without, whose tables are empty
MEM = SHARED_TRACES / "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"
ROWS = [(f"kernel_{i}", i, "x" * (i % 37)) for i in range(300)]
REPLY = Reply("the answer: 300 kernels", [Lines("facts", ["one", "two"], source="counted"),
                                          Table("kernels", ("name", "calls", "pad"), ROWS, ranked_by="calls",
                                                source="kernel events")])


def _cursor(text: str):
    return text.rsplit('more: "', 1)[1].split('"')[0] if 'more: "' in text else None


@pytest.mark.parametrize("budget", [500, 501, 1_000, 4_000])
def test_pages_fit_lead_with_the_answer_and_hold_every_row_once(budget):
    pages, cursor = [], None
    while True:
        text = page(REPLY, tool="t", answer_digest="0" * 12, budget=budget, cursor=cursor)
        assert len(text) <= 4 * budget and text.startswith("the answer: 300 kernels")
        pages.append(text)
        cursor = _cursor(text)
        if cursor is None:
            break
        assert text.splitlines()[-1].startswith(f'more: "{cursor}"')
    rows = [line for text in pages for line in text.splitlines() if line.startswith("| kernel_")]
    assert rows == [f"| kernel_{i} | {i} | {'x' * (i % 37)} |" for i in range(300)]  # whole, in rank order, once
    assert (len(pages) > 1) == (budget < 4_000)


def test_a_long_cell_is_shortened_and_its_row_kept_whole():
    wide = Reply("wide", [Table("t", ("a", "b"), [("y" * 5_000, "z" * 5_000), ("short", "row")])])
    text = page(wide, tool="t", answer_digest="0" * 12, budget=500)
    row = next(line for line in text.splitlines() if line.startswith("| y"))
    assert len(text) <= 2_000 and len(row) < 400 and row.endswith("z… |") and row.count(" | ") == 1
    assert text.splitlines()[-1] == "| short | row |"
    widest = Reply("widest", [Table("t", tuple("abcdefghijkl"), [tuple("w" * 500 for _ in range(12))] * 2)])
    text = page(widest, tool="t", answer_digest="0" * 12, budget=500)  # 12 cells of 160: one row past the page
    rows = [line for line in text.splitlines() if line.startswith("| w")]
    assert len(text) <= 2_000 and len(rows) == 1 and rows[0].count(" | ") == 11
    assert text.endswith('cursor="m0.1.000000000000")')


def test_an_answer_longer_than_the_budget_is_cut_to_one_line():
    long = Reply("rows of: SELECT " + "x, " * 10_000, [Table("rows", ("x",), [(1,)])])
    text = page(long, tool="sql", answer_digest="0" * 12, budget=500)
    assert len(text) <= 2_000 and len(text.splitlines()[0]) <= 500 and "| 1 |" in text
    assert len(json_page(long.answer, {"rows": [1]}, tool="sql", answer_digest="0" * 12, budget=500)) <= 2_000


def test_cursors_of_another_answer_are_refused():
    text = page(REPLY, tool="t", answer_digest="a" * 12, budget=500)
    for cursor, tool, d in ((_cursor(text), "t", "b" * 12), (_cursor(text), "u", "b" * 12), ("m9.0." + "a" * 12, "t",
                                                                                              "a" * 12),
                            ("j1." + "a" * 12, "t", "a" * 12), ("nonsense", "t", "a" * 12)):
        with pytest.raises(ParameterError, match="is not a place in this answer"):
            page(REPLY, tool=tool, answer_digest=d, budget=500, cursor=cursor)
    assert digest("t", {"a": 1}) != digest("t", {"a": 2}) != digest("u", {"a": 2})


NESTED = {"title": "t" * 900, "steps": [{"step": i, "why": "w" * (i * 7 % 200)} for i in range(120)],
          "prediction": {"sentence": "s" * 700, "by": {"rule": "r" * 600, "rows": list(range(400))}},
          "empty": [], "none": {}, "warnings": ["careful " * 20] * 5}


def _merged(whole: dict, more: dict) -> dict:
    for key, value in more.items():
        if key not in whole:
            whole[key] = value
        elif isinstance(value, list):
            whole[key] = whole[key] + value
        else:
            _merged(whole[key], value)
    return whole


@pytest.mark.parametrize("budget", [500, 700, 2_000, 50_000])
def test_json_pages_fit_and_merge_back_into_the_whole_object(budget):
    merged, cursor, pages = None, None, 0
    while True:
        text = json_page("the answer", NESTED, tool="t", answer_digest="c" * 12, budget=budget, cursor=cursor)
        assert len(text) <= 4 * budget and text.startswith('{"answer":"the answer"')
        got = json.loads(text)
        for name, (first, end, of) in got["rows"].items():
            assert 0 <= first < end <= of
        merged = got["data"] if merged is None else _merged(merged, got["data"])
        pages, cursor = pages + 1, got["more"]
        if cursor is None:
            break
    assert merged == NESTED and list(merged) == list(NESTED)  # every piece once, in order
    assert (pages == 1) == (budget == 50_000)


def test_one_json_row_longer_than_the_budget_is_one_line_saying_what_to_do():
    with pytest.raises(ParameterError, match="one row of this answer is longer than budget=500 tokens: raise budget"):
        json_page("a", {"rows": ["x" * 3_000]}, tool="t", answer_digest="0" * 12, budget=500)


def _answers(capsys):
    """(tool, trace path, its --json object) for every tool's command on shipped traces."""
    gpu = str(TRACES / GPU)
    mem = str(MEM if MEM.exists() else TRACES / "gpu/leaky_accumulating_callback.json.gz")
    runs = [(t, [gpu]) for t in ("diagnose", "whatif", "sync_points", "gaps", "critical_path", "hotspots",
                                 "gpu_kernels", "summary")]
    runs += [("memory", [mem]), ("ranks", [str(TRACES / "ranks/ddp4_slow_dataloader")]),
             ("trace_diff", [str(TRACES / "gpu/copies_pageable.pt.trace.json.gz"),
                             str(TRACES / "gpu/copies_pinned.pt.trace.json.gz")])]
    for tool, paths in runs:
        assert main([tool.replace("_", "-"), *paths, "--json"]) == 0
        out = capsys.readouterr().out
        yield tool, paths[0], json.loads(out.splitlines()[0] if tool == "summary" else out)


def _queries(source: str) -> list[str]:
    """The queries of ``source``'s "sql: ..." parts, each up to the parenthesis that closes the one before it."""
    out = []
    for match in re.finditer(r"sql: ", source):
        depth, query = 1, ""
        for char in source[match.end():]:
            depth += (char == "(") - (char == ")")
            if depth == 0:
                break
            query += char
        out.append(query.strip())
    return out


def test_every_block_says_where_its_figures_come_from_and_its_sql_runs(capsys):
    checked, blocks = 0, 0
    for tool, path, data in list(_answers(capsys)):
        reply = REPLIES[tool](data)
        assert reply.answer and "\n" not in reply.answer
        for block in reply.blocks:
            rows = block.rows if isinstance(block, Table) else block.lines
            blocks += bool(rows)
            assert not rows or block.source, (tool, block.title)
            for query in _queries(block.source) if rows else ():
                if "<" in query:  # a query with a place for one row's figure
                    continue
                frame = sql(query, load_trace(path))
                assert len(frame) and len(frame.columns), (tool, query)
                checked += 1
    assert blocks >= 40 and checked >= 12


def test_the_first_json_page_says_where_the_figures_come_from_within_a_quarter_of_the_budget():
    sources = {"steps": "each ProfilerStep window (sql: SELECT * FROM steps)", "huge": "y" * 3_000, "after": "z"}
    first = json.loads(json_page("a", NESTED, tool="t", answer_digest="c" * 12, budget=500, sources=sources))
    assert list(first) == ["answer", "sources", "data", "rows", "more"]
    assert first["sources"] == {"steps": sources["steps"]}  # in order, as many as fit 500 characters
    later = json.loads(json_page("a", NESTED, tool="t", answer_digest="c" * 12, budget=500, cursor=first["more"],
                                 sources=sources))
    assert "sources" not in later
    whole = json.loads(json_page("a", {"x": 1}, tool="t", answer_digest="c" * 12, sources=sources))
    assert list(whole["sources"]) == ["steps", "huge", "after"] and whole["data"] == {"x": 1}
