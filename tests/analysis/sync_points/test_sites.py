"""One call site, one row, the user's own first (``perfkit.analysis.sync_points.sites``): a function running when the
profiler started carries the line it was on then, and torch's own scalar reads (Adam's ``_get_value``) rank
after the user's ``.item()``. Synthetic CPU-only traces, so every ``aten::item`` is a possible sync point."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.sync_points.find import syncs
from perfkit.analysis.sync_points.sites import (
    _torch_frames_above, canonical_lines, frames_running_at_start, in_torch, torch_internal,
)
from perfkit.report.terminal.sync_points import format_syncs
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def _epochs(b: TraceBuilder, epochs: int, *, adam_us: float = 50.0) -> None:
    """A script whose ``train_epoch`` (def at line 8) was on line 14 when the profiler started, called
    again for the next epoch: 2 steps of 1 ms per epoch, each with the user's ``.item()`` (10 us) and
    Adam's internal ``_get_value`` read (``adam_us``, longer, so blocked time alone would rank it first)."""
    steps = 2 * epochs
    b.python("train.py(30): <module>", -50, steps * 1000 + 100)
    for epoch in range(epochs):
        line = 14 if epoch == 0 else 8  # running at the start: its current line; a later call: its first
        start = epoch * 2000
        b.python(f"train.py({line}): train_epoch", start - 40 if epoch == 0 else start, 1990)
        if epoch == 0:
            b.python("torch/profiler/profiler.py(1227): step", start - 39, 5)  # the tracer's own start
        for step in (2 * epoch, 2 * epoch + 1):
            ts = step * 1000
            b.step(step, ts, 1000)
            b.cpu_op("aten::item", ts + 100, 10)
            b.python("torch/optim/optimizer.py(538): wrapper", ts + 200, 300)
            b.python("torch/optim/optimizer.py(90): _get_value", ts + 210, adam_us + 20)
            b.cpu_op("aten::item", ts + 220, adam_us)
            b.python("torch/cuda/__init__.py(1000): synchronize", ts + 600, 30)  # called by the user: theirs
            b.cpu_op("aten::item", ts + 605, 20)


def test_a_user_item_is_one_site_ranked_before_adams_internal_reads(tmp_path):
    b = TraceBuilder(with_stack=True)
    _epochs(b, 2)
    result = syncs(load_trace(b.write(tmp_path / "t.json"), use_cache=False))
    sites = result.to_frame()
    assert len(sites) == 3
    direct, user, adam = sites.iloc[0], sites.iloc[1], sites.iloc[2]
    assert (direct["inner_func"], direct["torch_internal"], direct["count"]) == ("synchronize", False, 4)
    assert (user["file"], user["line"], user["func"], user["count"]) == ("train.py", 8, "train_epoch", 4)
    assert not user["torch_internal"] and not user["running_line"] and user["inner_file"] == ""
    assert adam["torch_internal"] and adam["inner_func"] == "_get_value" and adam["count"] == 4
    assert adam["blocked_us"] > user["blocked_us"]  # ranked after the user's site all the same
    text = format_syncs(result.to_json())
    assert text.index("train.py:8 (train_epoch)\n") < text.index("(_get_value)")
    assert "train.py:14" not in text
    assert "_get_value" not in " ".join(f.title for f in result.findings[:2])


def test_a_function_only_seen_running_says_so(tmp_path):
    b = TraceBuilder(with_stack=True)
    _epochs(b, 1)
    site = syncs(load_trace(b.write(tmp_path / "t.json"), use_cache=False)).to_json()["sites"][1]
    assert (site["line"], site["running_line"], site["torch_internal"]) == (14, True, False)
    assert "function running at train.py:14 when the profiler started (train_epoch)" in format_syncs(
        {**_empty_json(), "sites": [site]})


def test_two_functions_of_one_name_stay_two_sites(tmp_path):
    """Two ``forward`` methods of one file, both called while the tracer ran: two first lines, two sites."""
    b = TraceBuilder(with_stack=True)
    b.python("train.py(30): <module>", -50, 2100)
    b.python("torch/profiler/profiler.py(1227): step", -49, 5)
    for step in (0, 1):
        ts = step * 1000
        b.step(step, ts, 1000)
        for k, line in enumerate((10, 40)):
            b.python(f"model.py({line}): forward", ts + 100 + 300 * k, 100)
            b.cpu_op("aten::item", ts + 110 + 300 * k, 10)
    sites = syncs(load_trace(b.write(tmp_path / "t.json"), use_cache=False)).to_frame()
    assert sorted(sites["line"].tolist()) == [10, 40] and sites["count"].tolist() == [2, 2]


@pytest.mark.parametrize("path, internal", [
    ("torch/optim/optimizer.py", True),
    ("torchvision/ops/boxes.py", True),
    ("/usr/lib/python3/site-packages/torch/nn/utils/clip_grad.py", True),
    ("transformers/models/owlv2/modeling_owlv2.py", False),
    ("torchmetrics/metric.py", False),  # not torch itself
    ("torch/_tensor.py", False),  # Tensor.__format__, __float__: the user's own read
    ("torch/_tensor_str.py", False),
    ("", False),
    (None, False),
    ("C:\\venv\\Lib\\site-packages\\torch\\optim\\optimizer.py", True),  # a Windows path
    ("torch\\_tensor.py", False),
])
def test_torch_paths(path, internal):
    marks = in_torch(pd.Series([path], dtype=object))
    assert marks.tolist() == [internal] and marks.dtype == bool


def _empty_json() -> dict:
    return {"total": {"count": 1, "per_step": 1, "steps": 1, "blocked_us": 1.0, "gpu_confirmed": 0,
                      "host_scalar_reads": 0, "cpu_only": True},
            "by_kind": {}, "host_scalar_reads": {"sites": []}, "source_lines": "", "findings": [], "warnings": []}


def _load(b: TraceBuilder, tmp_path):
    return load_trace(b.write(tmp_path / "t.json"), use_cache=False)


def _running(tmp_path, build) -> set[str]:
    b = TraceBuilder(with_stack=True)
    build(b)
    return frames_running_at_start(_load(b, tmp_path))


@pytest.mark.parametrize("build, running", [
    # a stack written at once: the outermost frame and each child of the one before, until one is not
    (lambda b: (b.python("a.py(1): <module>", 0, 100), b.python("a.py(5): f", 1, 20),
                b.python("a.py(9): g", 30, 10), b.cpu_op("aten::add", 50, 1)),
     {"a.py(1): <module>", "a.py(5): f"}),
    (lambda b: (b.python("a.py(1): <module>", 0, 100), b.python("a.py(5): f", 1, 20),
                b.cpu_op("aten::add", 50, 1)),
     {"a.py(1): <module>", "a.py(5): f"}),                          # the whole thread is the stack
    (lambda b: (b.python("a.py(1): f", 0, 5), b.python("a.py(9): g", 10, 5), b.cpu_op("aten::add", 50, 1)),
     {"a.py(1): f"}),                                                 # a sibling began later: not running
    (lambda b: (b.python("a.py(1): f", 0, 5), b.cpu_op("aten::add", 50, 1)), {"a.py(1): f"}),
    (lambda b: (b.python("a.py(1): f", 0, 5),), {"a.py(1): f"}),    # a trace without ops
    (lambda b: (b.cpu_op("aten::add", 0, 1), b.python("a.py(1): f", 0, 5)), set()),   # starts with the op
    (lambda b: (b.cpu_op("aten::add", 0, 1), b.python("a.py(1): f", 1, 5)), set()),   # starts after it
    (lambda b: (b.annotation("## fwd ##", 0, 1), b.python("a.py(1): f", 1, 5)), set()),
    (lambda b: (b.cpu_op("aten::add", 0, 1),), set()),                                  # no frames at all
    # the GPU's and another thread's events are not frames, whenever they begin
    (lambda b: (b.runtime("cudaMalloc", -100, 5, tid=3), b.kernel("k", -90, 5), b.python("a.py(1): f", 0, 5),
                b.cpu_op("aten::add", 50, 1)), {"a.py(1): f"}),
    (lambda b: (b.python("a.py(1): f", 0, 5), b.python("b.py(2): worker", 1, 5, tid=2),
                b.kernel("k", 3, 1), b.cpu_op("aten::add", 50, 1)), {"a.py(1): f", "b.py(2): worker"}),
])
def test_frames_running_at_start(tmp_path, build, running):
    assert _running(tmp_path, build) == running


def test_each_trace_file_has_its_own_first_op(tmp_path):
    """Two files (two ranks' traces loaded together): a thread is compared with the first op of its own file."""
    b = TraceBuilder(with_stack=True)
    b.cpu_op("aten::add", 0, 1)
    b.python("a.py(1): late", 5, 5)                  # after its file's first op
    b.python("b.py(1): early", 6, 5, tid=2)          # before its file's (20)
    b.cpu_op("aten::mul", 20, 1, tid=2)
    trace = _load(b, tmp_path)
    ev = trace.events.copy()
    ev.loc[(ev["tid"] == "2").to_numpy(), "file_id"] = 1
    assert frames_running_at_start(SimpleNamespace(events=ev)) == {"b.py(1): early"}


def _frames(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["frame", "file", "line", "func"]).astype({"line": "Int64"})


def _loop_trace(tmp_path):
    """``train_epoch`` running at line 14 and called later (first line 8); ``loop`` running at lines 40 and, on a
    second thread, 12, and called later at 45 only (below neither)."""
    b = TraceBuilder(with_stack=True)
    b.python("train.py(30): <module>", 0, 2000)
    b.python("train.py(14): train_epoch", 1, 1900)
    b.python("train.py(40): loop", 2, 100)
    b.cpu_op("aten::add", 200, 1)
    b.python("train.py(8): train_epoch", 300, 50)
    b.python("train.py(45): loop", 400, 10)
    b.python("train.py(12): loop", 0, 100, tid=2)
    return _load(b, tmp_path)


def test_a_running_frame_takes_its_functions_first_line(tmp_path):
    frames = _frames([
        ("train.py(12): loop", "train.py", 12, "loop"),                 # no call at or above: the lowest running
        ("train.py(40): loop", "train.py", 40, "loop"),
        ("train.py(14): train_epoch", "train.py", 14, "train_epoch"),   # the call that began later: line 8
        ("train.py(8): train_epoch", "train.py", 8, "train_epoch"),
        ("x.py(3): h", "x.py", 3, "h"),                                 # not in the trace: as it is
        (None, "", pd.NA, ""),                                          # no user frame
    ])
    out = canonical_lines(_loop_trace(tmp_path), frames)
    assert out["line"].tolist()[:5] == [12, 12, 8, 8, 3] and out["line"].isna().tolist()[5]
    assert out["running_line"].tolist() == [True, True, False, False, False, False]
    assert str(out["line"].dtype) == "Int64"


def test_no_running_frame_leaves_the_lines(tmp_path):
    frames = _frames([("train.py(8): train_epoch", "train.py", 8, "train_epoch"), (None, "", pd.NA, "")])
    out = canonical_lines(_loop_trace(tmp_path), frames)
    assert out["line"].tolist()[0] == 8 and out["running_line"].tolist() == [False, False]


def test_torch_internal_is_a_bool_per_entry(tmp_path):
    trace = _loop_trace(tmp_path)
    events = trace.events.loc[trace.events["name"] == "aten::add"]
    marks = torch_internal(trace, events, pd.DataFrame({"inner_file": ["train.py"]}, index=events.index))
    assert marks.tolist() == [False] and marks.dtype == bool


_CHAIN = pd.DataFrame({"name": ["torch/a.py(1): f", "torch/b.py(2): g", "torch/c.py(3): h",   # 0 <- 1 <- 2
                                "train.py(5): main", "torch/x.py(1): a", "<built-in method item>",  # 3 <- 4 <- 5
                                "torch/loop.py(1): f"],                                          # 6 <- 6
                       "parent": [-1, 0, 1, -1, 3, 4, 6]})


@pytest.mark.parametrize("label, limit, calls", [
    (2, 1000, 3),     # up to the top frame (label 0)
    (2, 3, 3), (2, 2, 2), (2, 1, 1),   # at most ``limit`` frames
    (0, 1000, 1),
    (5, 1000, 1),     # a frame without a file is passed over; the user's frame stops the count
    (3, 1000, 0),
    (6, None, 1000),  # a cycle stops at the default limit
])
def test_torch_frames_above(label, limit, calls):
    args = () if limit is None else (limit,)
    assert _torch_frames_above(_CHAIN, label, *args) == calls
