"""Issue 54, rule 4: every DuckDB result type has an exact rendering in every ``perfkit sql`` format (table,
CSV, JSON lines). BLOB, BIT, INTERVAL, UNION and out-of-pandas-range dates ended in tracebacks; an integer
column with a NULL came out as lossy floats; ``SUM`` of integers was text in JSON; timestamps lost their
microseconds in JSON; a column named ``=HYPERLINK(...)`` reached a CSV header as a formula."""
from __future__ import annotations

import csv
import decimal
import io
import json

import pandas as pd
import pytest

from fuzzkit import event, run_main, write_trace
from perfkit.analysis.sql import sql
from perfkit.text import csv_cell as neutral
from perfkit.text import printable

# (DuckDB expression, table cell, CSV cell, JSON token): one row per DuckDB type, NULLs and edges of each.
TYPES = [
    ("42::TINYINT", "42", "42", "42"),
    ("(-32768)::SMALLINT", "-32768", "-32768", "-32768"),
    ("2147483647::INTEGER", "2147483647", "2147483647", "2147483647"),
    ("9007199254740993::BIGINT", "9007199254740993", "9007199254740993", "9007199254740993"),
    ("255::UTINYINT", "255", "255", "255"),
    ("18446744073709551615::UBIGINT", "18446744073709551615", "18446744073709551615", "18446744073709551615"),
    ("170141183460469231731687303715884105727::HUGEINT", "170141183460469231731687303715884105727",
     "170141183460469231731687303715884105727", "170141183460469231731687303715884105727"),
    ("340282366920938463463374607431768211455::UHUGEINT", "340282366920938463463374607431768211455",
     "340282366920938463463374607431768211455", "340282366920938463463374607431768211455"),
    ("1.5000000001::DECIMAL(20,10)", "1.5000000001", "1.5000000001", "1.5000000001"),
    ("0.1::DOUBLE", "0.1", "0.1", "0.1"),
    ("1e300::DOUBLE * 10", "1e+301", "1e+301", "1e+301"),
    ("0.1::FLOAT", "0.10000000149011612", "0.10000000149011612", "0.10000000149011612"),
    ("'nan'::DOUBLE", "NaN", "NaN", "null"),
    ("'inf'::DOUBLE", "inf", "inf", "null"),
    ("true", "true", "true", "true"),
    ("'text'::VARCHAR", "text", "text", '"text"'),
    ("'a\\x00b'::BLOB", "a\\x00b", "a\\x00b", '"a\\\\x00b"'),
    ("'101'::BIT", "101", "101", '"101"'),
    ("INTERVAL 3 DAY + INTERVAL 4 MICROSECONDS", "3 days 00:00:00.000004", "3 days 00:00:00.000004",
     '"3 days 00:00:00.000004"'),
    ("union_value(k := 7)", "7", "7", '"7"'),
    ("DATE '5000-01-01'", "5000-01-01", "5000-01-01", '"5000-01-01"'),
    ("'infinity'::DATE", "infinity", "infinity", '"infinity"'),
    ("TIMESTAMP '2024-01-01 12:00:00.123456'", "2024-01-01 12:00:00.123456", "2024-01-01 12:00:00.123456",
     '"2024-01-01 12:00:00.123456"'),
    ("TIMESTAMP_NS '2024-01-01 12:00:00.123456789'", "2024-01-01 12:00:00.123456789",
     "2024-01-01 12:00:00.123456789", '"2024-01-01 12:00:00.123456789"'),
    ("TIMESTAMP '294247-01-10 04:00:54.775806'", "294247-01-10 04:00:54.775806", "294247-01-10 04:00:54.775806",
     '"294247-01-10 04:00:54.775806"'),
    ("TIME '23:59:59.999999'", "23:59:59.999999", "23:59:59.999999", '"23:59:59.999999"'),
    ("'00000000-0000-0000-0000-000000000001'::UUID", "00000000-0000-0000-0000-000000000001",
     "00000000-0000-0000-0000-000000000001", '"00000000-0000-0000-0000-000000000001"'),
    ("'b'::ENUM('a', 'b')", "b", "b", '"b"'),
    ("[9007199254740993, NULL]", "[9007199254740993,null]", "[9007199254740993,null]", "[9007199254740993,null]"),
    ("{'k': 'v', 'n': 1}", '{"k":"v","n":1}', '{"k":"v","n":1}', '{"k":"v","n":1}'),
    ("map([1], ['x'])", '[[1,"x"]]', '[[1,"x"]]', '[[1,"x"]]'),
    ("[INTERVAL 1 DAY]", "[1 day]", "[1 day]", '"[1 day]"'),
    ("[1, 2]::INTEGER[2]", "[1,2]", "[1,2]", "[1,2]"),
]
NULL_TYPES = ["BIGINT", "INTEGER", "UBIGINT", "HUGEINT", "DOUBLE", "DECIMAL(10,2)", "BOOLEAN", "VARCHAR", "BLOB",
              "DATE", "TIMESTAMP", "INTERVAL", "INTEGER[]"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("sql") / "t.json",
                       [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500)])


def _output(trace, query, fmt):
    out = run_main("sql", query, trace, *([f"--{fmt}"] if fmt != "table" else []))
    out.assert_clean(codes=(0,), json_out=False)
    return out.out


@pytest.mark.parametrize("expr, table, csv_cell, token", TYPES, ids=[t[0][:40] for t in TYPES])
def test_each_type_is_exact_in_every_format(trace, expr, table, csv_cell, token):
    query = f"SELECT {expr} AS v, 1 AS one"
    lines = _output(trace, query, "table").splitlines()
    assert lines[1].rsplit(None, 1)[0].strip() == table, lines
    rows = list(csv.reader(io.StringIO(_output(trace, query, "csv"))))
    assert rows == [["v", "one"], [csv_cell, "1"]]
    text = _output(trace, query, "json").strip()
    assert text == f'{{"v":{token},"one":1}}'
    json.loads(text)  # strict JSON


@pytest.mark.parametrize("kind", NULL_TYPES)
def test_a_null_of_each_type_is_null_in_every_format_and_keeps_its_column_exact(trace, kind):
    big = {"BIGINT": "9007199254740993", "UBIGINT": "18446744073709551615", "HUGEINT": str(2**100)}.get(kind)
    value = f"{big}::{kind}" if big else f"NULL::{kind}"
    query = f"SELECT * FROM (VALUES ({value}), (NULL::{kind})) t(v)"
    assert _output(trace, query, "table").splitlines()[-1].strip() == "NULL"
    assert list(csv.reader(io.StringIO(_output(trace, query, "csv"))))[-1] == [""]
    lines = _output(trace, query, "json").splitlines()
    assert lines[-1] == '{"v":null}'
    if big:  # the NULL beside it does not turn the integers into floats
        assert lines[0] == f'{{"v":{big}}}' and big in _output(trace, query, "table")


def test_the_frame_keeps_exact_python_values(trace):
    frame = sql("SELECT i, sum(1::BIGINT) OVER () AS s, d, f FROM (VALUES (9007199254740993, 1.25::DECIMAL(5,2), "
                "NULL::DOUBLE), (NULL, NULL, 'nan'::DOUBLE)) t(i, d, f)", trace)
    assert str(frame["i"].dtype) == "Int64" and frame["i"][0] == 9007199254740993 and frame["i"][1] is pd.NA
    assert frame["s"].tolist() == [2, 2] and isinstance(frame["s"][0], int)
    assert frame["d"][0] == decimal.Decimal("1.25")
    assert frame["f"][0] is None and frame["f"][1] != frame["f"][1]  # NULL and NaN stay apart


@pytest.mark.parametrize("name", ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "'=already"])
def test_csv_headers_are_neutralized_like_cells(trace, name):
    alias, literal = name.replace('"', '""'), name.replace("'", "''")
    rows = list(csv.reader(io.StringIO(_output(trace, f"SELECT '{literal}' AS \"{alias}\"", "csv"))))
    shown = printable(neutral(name))  # a tab is shown as \\t, as everything perfkit prints
    assert rows[0] == [shown] and rows[1] == [shown]
    assert rows[0][0][0] not in "=+-@\t"


def test_repeated_column_names_keep_their_own_values(trace):
    assert _output(trace, "SELECT 1 AS a, 'x'::BLOB AS a", "json").strip() == '{"a":1,"a":"x"}'
