"""``ProfileWindow`` never breaks the training run: a failure inside perfkit (a folder it cannot make, a profiler
already running, a framework whose objects differ) is one warning on the ``perfkit`` logger and the loop goes on
with its own results; steps advance with the global step; unchosen ranks record nothing."""
from __future__ import annotations

import logging

import pytest
import torch

import perfkit
from perfkit.errors import ParameterError
from perfkit.integrations.lightning import PerfkitCallback
from perfkit.integrations.window import ProfileWindow
from windowcheck import linear_train_step


def _loop(step, n=6):
    train_step = linear_train_step()
    fn = step(train_step) if step else train_step
    return [fn(torch.randn(4, 8)) for _ in range(n)], fn


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "perfkit" and r.levelno == logging.WARNING]


def test_an_unwritable_folder_is_one_warning_and_the_loop_goes_on(tmp_path, caplog):
    (tmp_path / "file").write_text("in the way")
    plain, _ = _loop(None)
    losses, step = _loop(lambda f: perfkit.watch(f, wait=1, warmup=1, active=2, out=tmp_path / "file", run="r"))
    assert losses == plain
    assert len(_warnings(caplog)) == 1 and "training goes on" in _warnings(caplog)[0]
    assert step.window.failed and step.result is None


def test_a_profiler_already_running_is_one_warning_and_the_loop_goes_on(tmp_path, caplog):
    plain, _ = _loop(None)
    with torch.profiler.profile():
        losses, step = _loop(lambda f: perfkit.watch(f, wait=1, warmup=1, active=2, out=tmp_path, run="r"))
    assert losses == plain
    assert len(_warnings(caplog)) == 1 and step.window.failed
    assert not (tmp_path / "r").exists()  # nothing half-written is left


def test_a_framework_object_without_the_expected_attributes_is_one_warning(caplog):
    callback = PerfkitCallback(wait=1, warmup=1, active=1)
    callback.on_train_start(object(), None)  # a Trainer of a version whose attributes differ
    callback.on_train_batch_end(object(), None, None, None, 0)
    callback.on_train_end(object(), None)
    assert len(_warnings(caplog)) == 1 and "AttributeError" in _warnings(caplog)[0]


def test_steps_advance_with_the_global_step_only(tmp_path):
    window = ProfileWindow("test", wait=0, warmup=0, active=2, out=tmp_path, run="g")
    window.begin(0)
    for global_step in (0, 1, 1, 1, 2):  # micro-batches of one step repeat its global step
        window.step(global_step)
    assert window.result is not None and window.result.steps_recorded == 2
    assert window.result.trace.name == "g-rank0-steps0-1.pt.trace.json.gz"


def test_a_run_resumed_past_wait_records_at_once_with_its_global_steps(tmp_path):
    window = ProfileWindow("test", wait=5, warmup=1, active=1, out=tmp_path, run="resumed")
    window.begin(1000)
    for global_step in (1001, 1002):
        window.step(global_step)
    assert window.result.trace.name == "resumed-rank0-steps1001-1001.pt.trace.json.gz"


def test_a_rank_not_chosen_records_nothing(tmp_path):
    window = ProfileWindow("test", wait=0, warmup=0, active=1, ranks=[0], out=tmp_path, run="r")
    window.begin(0, rank=1)
    window.step(1)
    window.end()
    assert not window.recording and window.result is None and not (tmp_path / "r").exists()


@pytest.mark.parametrize("options, message", [({"active": 0}, "active=0"), ({"ranks": "first"}, "ranks 'first'"),
                                              ({"trigger": "slow:1x"}, "factor above 1")])
def test_bad_options_are_refused_when_the_callback_is_made(options, message):
    with pytest.raises(ParameterError, match=message):
        ProfileWindow("test", **options)
