"""Checks every framework's test makes of a profiled window: the trace file named for run, rank and steps, its
ProfilerStep spans (read from the raw JSON, without perfkit), and what a TensorBoard log dir received."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch


def linear_train_step():
    """A seeded one-layer model and its train step ``f(x) -> loss`` (an ``.item()`` each step, as scripts log)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return train_step


def profiler_steps(path) -> list[int]:
    """The N of each ``ProfilerStep#N`` span in a gzipped trace, sorted."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return sorted({int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})


def tensorboard_tags(log_dir) -> dict[str, list[str]]:
    """{"text": the text tags, "scalars": the scalar tags} of the event files under ``log_dir``."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer(size_guidance={"tensors": 0, "scalars": 0}).AddRunsFromDirectory(str(log_dir))
    mux.Reload()
    tags = {"text": [], "scalars": []}
    for run in mux.Runs():
        acc = mux.GetAccumulator(run)
        tags["text"] += [t for t in acc.Tags()["tensors"] if t.endswith("text_summary")]
        tags["scalars"] += acc.Tags()["scalars"]
    return tags


def tensorboard_text(log_dir, tag: str = "perfkit/verdict/text_summary") -> str:
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer(size_guidance={"tensors": 0}).AddRunsFromDirectory(str(log_dir))
    mux.Reload()
    for run in mux.Runs():
        acc = mux.GetAccumulator(run)
        if tag in acc.Tags()["tensors"]:
            return acc.Tensors(tag)[-1].tensor_proto.string_val[0].decode()
    return ""


def check_window(window, *, run: str, rank: int, steps: tuple[int, int]) -> Path:
    """The window wrote one trace named ``<run>-rank<rank>-steps<a>-<b>`` holding ProfilerStep#a..#b, and has a
    verdict. Returns the trace."""
    result = window.result
    assert window.failed == "" and result is not None and result.trace is not None, window.failed
    trace = Path(result.trace)
    assert trace.name == f"{run}-rank{rank}-steps{steps[0]}-{steps[1]}.pt.trace.json.gz" and trace.parent.name == run
    assert profiler_steps(trace) == list(range(steps[0], steps[1] + 1))
    assert result.steps_recorded == steps[1] - steps[0] + 1
    assert window.record["title"] and len(window.record["numbers"]) == 3
    return trace
