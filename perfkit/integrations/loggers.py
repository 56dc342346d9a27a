"""The verdict of a profiled window, written where the run already logs: a TensorBoard ``SummaryWriter`` (text and
scalars), W&B (``run.log`` and the run's summary) and MLflow (metrics, tags, the verdict as a text artifact and
the HTML report), each only when the run has it: W&B and MLflow only when the script imported them and a run is
active; nothing is written when the run has none of them. A sink that fails is skipped with its reason
(:func:`publish` returns it), never raised into the training.
"""
from __future__ import annotations

import re
import sys

PREFIX = "perfkit"


def verdict_record(result, report: str | None = None) -> dict:
    """What is logged: ``verdict``, ``title``, ``numbers`` (the three figures behind it: ``label``, ``value``,
    ``unit``, ``text``), ``fix`` (ending in what it is predicted to buy), ``prediction`` (the diagnosis's: the top
    fix replayed, ``fix`` None where there is none), ``step_ms`` (median recorded step), ``traces`` and ``report``
    (paths)."""
    d = result.diagnosis or {}
    traces = [str(p) for p in [result.trace, *result.extra_traces] if p]
    median = result.step_median_s
    return {"verdict": d.get("verdict", ""), "title": d.get("title", ""), "numbers": list(d.get("evidence", []))[:3],
            "fix": d.get("fix", ""), "prediction": d.get("prediction") or {"fix": None},
            "step_ms": None if median is None else median * 1e3, "traces": traces, "report": report}


def scalars(record: dict) -> dict[str, float]:
    """``perfkit/<label>``: each number's value (a number whose value is not numeric is left out),
    ``perfkit/step_ms``, and where a fix is predicted ``perfkit/predicted_step_ms`` and ``perfkit/predicted_speedup``
    (the replayed median step with the top fix, and the speedup it buys; not for a bound, which no change buys)."""
    out = {f"{PREFIX}/{_slug(n.get('label', ''))}": float(n["value"]) for n in record["numbers"]
           if isinstance(n.get("value"), (int, float)) and not isinstance(n.get("value"), bool)}
    if record["step_ms"] is not None:
        out[f"{PREFIX}/step_ms"] = float(record["step_ms"])
    prediction = record.get("prediction") or {}
    if prediction.get("fix") and not prediction.get("bound"):
        out[f"{PREFIX}/predicted_step_ms"] = float(prediction["predicted_step_us"]) / 1e3
        out[f"{PREFIX}/predicted_speedup"] = float(prediction["speedup"])
    return out


def markdown(record: dict) -> str:
    """The verdict as a few lines of Markdown (TensorBoard renders its text tab as Markdown)."""
    lines = [f"**{record['title'] or record['verdict']}**", ""]
    lines += [f"- {n.get('text') or n.get('label')}" for n in record["numbers"]]
    lines += ["", f"fix: {record['fix']}"] if record["fix"] else []
    lines += [""] + [f"trace: `{t}`" for t in record["traces"]]
    lines += [f"report: `{record['report']}`"] if record["report"] else []
    return "\n".join(lines)


def publish(record: dict, *, writers=(), mlflow_runs=(), step: int = 0) -> tuple[list[str], list[str]]:
    """Write ``record`` to each TensorBoard writer, each (MlflowClient, run id) of ``mlflow_runs``, the active
    W&B run and the active MLflow run. Returns (the sinks written, why a sink failed)."""
    written, failed = [], []
    sinks = [("tensorboard", lambda w=w: _tensorboard(w, record, step)) for w in writers]
    sinks += [("mlflow", lambda c=c, r=r: _mlflow_client(c, r, record, step)) for c, r in mlflow_runs]
    wandb_run = getattr(sys.modules.get("wandb"), "run", None)
    if wandb_run is not None:
        sinks.append(("wandb", lambda: _wandb(wandb_run, record)))
    mlflow = sys.modules.get("mlflow")
    active = mlflow.active_run() if mlflow is not None and hasattr(mlflow, "active_run") else None
    if active is not None and active.info.run_id not in {r for _, r in mlflow_runs}:
        sinks.append(("mlflow", lambda: _mlflow_client(mlflow.tracking.MlflowClient(), active.info.run_id, record, step)))
    for name, write in sinks:
        try:
            write()
            written.append(name)
        except Exception as exc:  # noqa: BLE001 (a logger's failure is the run's to keep going past)
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return written, failed


def _tensorboard(writer, record: dict, step: int) -> None:
    writer.add_text(f"{PREFIX}/verdict", markdown(record), step)
    for name, value in scalars(record).items():
        writer.add_scalar(name, value, step)
    writer.flush()


def _wandb(run, record: dict) -> None:
    run.log(scalars(record))
    run.summary[f"{PREFIX}/verdict"] = record["title"] or record["verdict"]
    run.summary[f"{PREFIX}/fix"] = record["fix"]
    run.summary[f"{PREFIX}/traces"] = record["traces"]
    if record["report"]:
        run.summary[f"{PREFIX}/report"] = record["report"]


def _mlflow_client(client, run_id: str, record: dict, step: int) -> None:
    for name, value in scalars(record).items():
        client.log_metric(run_id, name, value, step=step)
    client.set_tag(run_id, f"{PREFIX}.verdict", (record["title"] or record["verdict"])[:5000])
    client.set_tag(run_id, f"{PREFIX}.trace", ";".join(record["traces"])[:5000])
    client.log_text(run_id, markdown(record), f"{PREFIX}/verdict.md")
    if record["report"]:
        client.log_artifact(run_id, record["report"], PREFIX)


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(label).lower()).strip("_") or "value"
