"""The verdict in W&B (offline mode) and MLflow (a local file store) when the script has an active run, through
``perfkit.watch`` on a plain loop; nothing is written where no run is active."""
from __future__ import annotations

import pytest
import torch

import perfkit
from perfkit.integrations.loggers import markdown, publish, scalars
from windowcheck import linear_train_step

pytestmark = pytest.mark.slow  # wandb starts its service process


def _loop(tmp_path, run: str):
    train_step = linear_train_step()
    step = perfkit.watch(train_step, wait=1, warmup=1, active=2, out=tmp_path / "traces", run=run)
    for _ in range(5):
        step(torch.randn(4, 8))
    return step.window


def test_wandb_offline_run_gets_the_verdict_in_its_summary(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=str(tmp_path), project="perfkit-test")
    try:
        window = _loop(tmp_path, "wb")
        assert window.logged == ["wandb"]
        assert run.summary["perfkit/verdict"] == window.record["title"]
        assert run.summary["perfkit/traces"] == [str(window.result.trace)]
        assert run.summary["perfkit/step_ms"] == pytest.approx(window.record["step_ms"])
    finally:
        wandb.finish()


def test_mlflow_file_store_run_gets_metrics_tags_and_the_verdict_text(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    with mlflow.start_run() as active:
        window = _loop(tmp_path, "ml")
    assert window.logged == ["mlflow"]
    client = mlflow.tracking.MlflowClient()
    data = client.get_run(active.info.run_id).data
    assert data.tags["perfkit.verdict"] == window.record["title"]
    assert set(scalars(window.record)) <= set(data.metrics)
    assert [a.path for a in client.list_artifacts(active.info.run_id, "perfkit")] == ["perfkit/verdict.md"]


def test_a_failing_sink_is_reported_not_raised():
    class Broken:
        def add_text(self, *a):
            raise OSError("disk full")

    record = {"verdict": "v", "title": "t", "numbers": [], "fix": "", "prediction": {"fix": None}, "step_ms": 1.0,
              "traces": ["x"], "report": None}
    written, failed = publish(record, writers=[Broken()])
    assert written == [] and failed == ["tensorboard: OSError: disk full"]
    assert markdown(record).startswith("**t**") and "trace: `x`" in markdown(record)


def test_the_predicted_step_is_a_scalar_where_a_fix_is_predicted():
    record = {"numbers": [{"label": "GPU busy", "value": 0.4}], "step_ms": 4.1,
              "prediction": {"fix": "remove_syncs", "predicted_step_us": 2_900.0, "speedup": 1.41}}
    assert scalars(record) == {"perfkit/gpu_busy": 0.4, "perfkit/step_ms": 4.1, "perfkit/predicted_step_ms": 2.9,
                               "perfkit/predicted_speedup": 1.41}
    assert "perfkit/predicted_step_ms" not in scalars(dict(record, prediction={"fix": None}))
    bound = dict(record["prediction"], fix="host_compute", bound=True)  # what no host work would give: no change buys it
    assert "perfkit/predicted_step_ms" not in scalars(dict(record, prediction=bound))
