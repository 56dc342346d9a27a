"""One call site, one row, the user's own first (``perfkit.analysis.sync_points.sites``): a function running when the
profiler started carries the line it was on then, and torch's own scalar reads (Adam's ``_get_value``) rank
after the user's ``.item()``. Synthetic CPU-only traces, so every ``aten::item`` is a possible sync point."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.sync_points.find import syncs
from perfkit.analysis.sync_points.sites import in_torch
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
])
def test_torch_paths(path, internal):
    assert in_torch(pd.Series([path])).tolist() == [internal]


def _empty_json() -> dict:
    return {"total": {"count": 1, "per_step": 1, "steps": 1, "blocked_us": 1.0, "gpu_confirmed": 0,
                      "host_scalar_reads": 0, "cpu_only": True},
            "by_kind": {}, "host_scalar_reads": {"sites": []}, "source_lines": "", "findings": [], "warnings": []}
