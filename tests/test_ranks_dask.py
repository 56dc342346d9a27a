"""The Dask engine on a real LocalCluster of 2 worker processes: same result as the local engine,
errors from workers reach the caller, and a missing or unreachable scheduler is a clear error."""
import distributed
import pytest

from perfkit.analysis.ranks import engines
from perfkit.analysis.ranks.combine import ranks
from perfkit.errors import ParameterError, TraceError

from rankjobs import dlrm_dir, sync_job




@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


def test_dask_engine_equals_the_local_engine_on_dlrm(tmp_path, cluster):
    d = dlrm_dir(tmp_path / "dlrm")
    local = ranks(d, workers=1, use_cache=False)
    remote = ranks(d, engine="dask", scheduler=cluster.scheduler_address, use_cache=False)
    assert remote.to_json() == local.to_json()
    assert len(remote.ranks) == 8 and not remote.stragglers.empty


def test_dask_scheduler_from_the_environment(tmp_path, cluster, monkeypatch):
    d = sync_job(tmp_path / "job", [1000, 1000, 2000, 1000])
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.scheduler_address)
    remote = ranks(d, engine="dask", use_cache=False)
    assert remote.to_json() == ranks(d, workers=1, use_cache=False).to_json()
    assert set(remote.stragglers["rank"]) == {2}


def test_trace_error_on_a_worker_reaches_the_caller(tmp_path, cluster):
    d = sync_job(tmp_path / "job", [1000, 1000])
    (d / "rank1.json").write_text('{"traceEvents": [')
    with pytest.raises(TraceError, match="rank1.json"):
        ranks(d, engine="dask", scheduler=cluster.scheduler_address, use_cache=False)


def test_missing_or_unreachable_scheduler(tmp_path, monkeypatch):
    d = sync_job(tmp_path / "job", [1000, 1000])
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with pytest.raises(ParameterError, match="DASK_SCHEDULER_ADDRESS"):
        ranks(d, engine="dask")
    monkeypatch.setattr(engines, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ParameterError, match="cannot reach the Dask scheduler"):
        ranks(d, engine="dask", scheduler="tcp://127.0.0.1:9")
