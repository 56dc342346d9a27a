"""`perfkit export --parquet`: a Hive-partitioned dataset that reads back as the loaded trace."""
import json

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from perfkit.cli import main
from perfkit.errors import ParameterError
from perfkit.trace import load_trace
from perfkit.export.parquet import export_parquet

from conftest import shared_trace


@pytest.fixture
def dlrm():
    return [shared_trace(f"param_v100_dlrm_rank{r}.pt.trace.json.gz") for r in (0, 1, 2)]


def read_table(directory, table: str) -> pd.DataFrame:
    data = ds.dataset(directory / table, format="parquet", partitioning="hive").to_table().to_pandas()
    return data.sort_values(["rank", "file_id"] if "file_id" in data else ["rank"], kind="stable").reset_index(drop=True)


def test_dataset_reads_back_as_the_trace(tmp_path, dlrm):
    out = tmp_path / "ds"
    dataset = export_parquet(dlrm, out, workers=1)
    trace = load_trace(dlrm)
    assert dataset.ranks == (0, 1, 2) and dataset.rows["events"] == len(trace.events)
    events = read_table(out, "events")
    expected = trace.events.sort_values(["rank", "file_id"], kind="stable").reset_index(drop=True)
    assert (events["row"].to_numpy() == np.concatenate([np.arange(n) for n in trace.events.groupby("file_id").size()])).all()
    nested = events[events["parent"] >= 0]
    parents = events.set_index(["file_id", "row"]).loc[list(zip(nested["file_id"], nested["parent"]))]
    assert (parents["ts_us"].to_numpy() <= nested["ts_us"].to_numpy()).all()  # a parent starts first
    for column in trace.events.columns:
        if column == "parent":  # labels of the whole table there, rows of the file here
            continue
        got, want = events[column], expected[column]
        if isinstance(want.dtype, pd.CategoricalDtype):
            got, want = got.astype(str), want.astype(str)
        assert (got.to_numpy() == want.to_numpy()).all(), column
    steps = read_table(out, "steps")
    assert len(steps) == len(trace.steps) and (steps["dur_us"].to_numpy() == trace.steps["dur_us"].to_numpy()).all()
    files = read_table(out, "files")
    assert files["path"].tolist() == [str(p) for p in dlrm]
    assert json.loads(files["distributed"][1])["rank"] == 1
    assert len(read_table(out, "flows")) == len(trace.flows)


def test_layout_is_one_file_per_rank_with_rank_only_in_the_path(tmp_path, dlrm):
    out = tmp_path / "ds"
    export_parquet(dlrm, out, workers=1)
    files = sorted(p.relative_to(out).as_posix() for p in (out / "events").rglob("*.parquet"))
    assert files == [f"events/rank={r}/file-{r}.parquet" for r in (0, 1, 2)]
    schema = pq.read_schema(out / "events" / "rank=1" / "file-1.parquet")
    assert "rank" not in schema.names  # Spark refuses a column that is both in the file and the path
    assert schema.field("name").type.value_type in ("string", "large_string")
    assert schema.metadata[b"perfkit.export_format"] == b"1"
    manifest = json.loads((out / "_perfkit.json").read_text())
    assert manifest["format"] == 1 and manifest["ranks"] == [0, 1, 2]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


def test_existing_directory_is_refused_unless_overwrite(tmp_path, dlrm):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(ParameterError, match="already exists"):
        export_parquet(dlrm[:1], out)
    assert (out / "mine.txt").read_text() == "keep"
    with pytest.raises(ParameterError, match="not a Parquet dataset perfkit wrote"):
        export_parquet(dlrm[:1], out, overwrite=True)  # a folder of the user's: never replaced
    assert (out / "mine.txt").read_text() == "keep"
    ours = tmp_path / "ours"
    export_parquet(dlrm[:2], ours)
    export_parquet(dlrm[:1], ours, overwrite=True)  # a dataset perfkit wrote: replaced
    assert (ours / "events" / "rank=0").is_dir() and not (ours / "events" / "rank=1").exists()


def _small(path):
    from tracebuilder import TraceBuilder

    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("aten::add", 10, 5)
    return b.write(path)


@pytest.mark.parametrize("where", ["the input folder", "the input file", "a folder above the input", "."])
def test_overwrite_never_deletes_an_input(tmp_path, monkeypatch, capsys, where):
    run = tmp_path / "run"
    run.mkdir()
    trace = _small(run / "rank0.json")
    target = {"the input folder": run, "the input file": trace, "a folder above the input": tmp_path, ".": "."}[where]
    monkeypatch.chdir(run)
    assert main(["export", "--parquet", str(target), "--overwrite", str(run)]) == 2
    assert "a trace being exported" in capsys.readouterr().err
    assert trace.is_file() and trace.read_bytes() == _small(tmp_path / "again.json").read_bytes()


def test_cli_export(tmp_path, dlrm, capsys):
    out = tmp_path / "ds"
    assert main(["export", "--parquet", str(out), "--workers", "2", *map(str, dlrm)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: ranks [0, 1, 2]" in printed and "read_parquet" in printed
    assert main(["export", "--parquet", str(out), str(dlrm[0])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0]


def test_duckdb_reads_the_dataset_as_it_is(tmp_path, dlrm):
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "ds"
    export_parquet(dlrm, out, workers=1)
    trace = load_trace(dlrm)
    rows = duckdb.sql(f"SELECT rank, count(*), sum(dur_us) FROM read_parquet('{out}/events/*/*.parquet', "
                      "hive_partitioning=true) GROUP BY rank ORDER BY rank").fetchall()
    expected = trace.events.groupby("rank")["dur_us"].agg(["count", "sum"])
    assert [(r, n) for r, n, _ in rows] == [(r, int(expected.loc[r, "count"])) for r in (0, 1, 2)]
    assert [s for _, _, s in rows] == pytest.approx(expected["sum"].tolist())


def test_dask_reads_the_dataset_as_it_is(tmp_path, dlrm):
    dd = pytest.importorskip("dask.dataframe")
    out = tmp_path / "ds"
    export_parquet(dlrm, out, workers=1)
    frame = dd.read_parquet(out / "events").compute()
    assert sorted(frame["rank"].astype(int).unique()) == [0, 1, 2]
    assert len(frame) == len(load_trace(dlrm).events)
