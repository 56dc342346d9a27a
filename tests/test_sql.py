"""perfkit.sql: DuckDB over the views events, flows, steps and ranks of a trace; numbers checked
against the Trace's own tables and the cross-rank analysis."""
import json

import pytest

from perfkit.analysis.ranks.combine import ranks
from perfkit.analysis.sql import VIEWS, sql
from perfkit.cli import main
from perfkit.errors import ParameterError
from perfkit.trace import load_trace

from rankjobs import dlrm_dir, sync_job


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return sync_job(tmp_path_factory.mktemp("sql") / "job", [1000, 1000, 2000])


def test_views_have_the_trace_schema(job):
    trace = load_trace(job, use_cache=False)
    for view, frame in (("events", trace.events), ("flows", trace.flows), ("steps", trace.steps)):
        out = sql(f"SELECT * FROM {view}", trace)
        assert list(out.columns) == list(frame.columns) and len(out) == len(frame), view
    assert set(VIEWS) == {"events", "flows", "steps", "ranks"}
    ranks_view = sql("SELECT rank, path, world_size, devices FROM ranks ORDER BY file_id", trace)
    assert list(ranks_view["rank"]) == [0, 1, 2] and ranks_view["path"].str.endswith(".json").all()
    assert list(ranks_view["world_size"]) == [3, 3, 3]  # the job's 3 ranks, as sync_job writes distributedInfo


def test_a_question_the_analyses_do_not_answer(job):
    trace = load_trace(job, use_cache=False)
    out = sql("""SELECT e.rank, count(*) AS kernels, sum(e.dur_us) AS us FROM events e
                 JOIN steps s ON e.rank = s.rank AND e.ts_us >= s.start_us AND e.ts_us < s.end_us
                 WHERE e.cat = 'kernel' AND e.name LIKE 'ncclKernel%' AND s.step >= 2
                 GROUP BY e.rank ORDER BY e.rank""", trace)
    ev = trace.events
    for r in range(3):
        steps = trace.steps[(trace.steps["rank"] == r) & (trace.steps["step"] >= 2)]
        mine = ev[(ev["rank"] == r) & (ev["cat"] == "kernel") & ev["name"].astype(str).str.startswith("ncclKernel")]
        inside = mine[mine["ts_us"].apply(lambda t: ((steps["start_us"] <= t) & (t < steps["end_us"])).any())]
        assert out.loc[r, "kernels"] == len(inside) == 2
        assert out.loc[r, "us"] == pytest.approx(inside["dur_us"].sum())


def test_sql_agrees_with_ranks_on_dlrm(tmp_path):
    d = dlrm_dir(tmp_path / "dlrm")
    out = sql("SELECT rank, min(ts_us) AS first_nccl FROM events WHERE cat = 'kernel' AND lower(name) LIKE '%nccl%' "
              "GROUP BY rank ORDER BY first_nccl", d)
    first = ranks(d, workers=1, use_cache=False).collectives.iloc[0]
    assert out["rank"].iloc[0] == first["first_rank"] and out["rank"].iloc[-1] == first["last_rank"]
    assert out["first_nccl"].iloc[-1] - out["first_nccl"].iloc[0] == first["skew_us"]


def test_bad_queries_are_parameter_errors(job):
    with pytest.raises(ParameterError, match="empty"):
        sql("  ", job)
    with pytest.raises(ParameterError, match="SQL query failed .views: events, flows, steps, ranks.*nope"):
        sql("SELECT nope FROM events", job)


def test_cli_prints_table_csv_and_json(job, capsys):
    query = "SELECT rank, count(*) AS n FROM events WHERE cat = 'kernel' GROUP BY rank ORDER BY rank"
    assert main(["sql", query, str(job), "--no-cache"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["rank", "n"]
    assert main(["sql", query, str(job), "--csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["rank,n", "0,12", "1,12", "2,12"]
    assert main(["sql", query, str(job), "--json"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()][1] == {"rank": 1, "n": 12}
    assert main(["sql", "SELECT broken", str(job)]) == 2
    assert "SQL query failed" in capsys.readouterr().err
