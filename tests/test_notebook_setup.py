"""open_case: a case study's set-up in one call, on the shipped traces (trace mode)."""
import os
import re

import pytest

pytest.importorskip("torch")

from perfkit.errors import ParameterError  # noqa: E402
from perfkit.bench.ladder import Arm
from perfkit.notebook_setup import open_case  # noqa: E402

ARMS = (Arm("FloatTensor per sample", "float_tensor"), Arm("from_numpy + inference_mode", "from_numpy"))
PATHS = ("cpu/mppi_float_tensor.json.gz", "cpu/mppi_from_numpy.json.gz")


def test_trace_mode_loads_both_traces_and_names_the_pair(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    before, after, subject, run_id, labels = open_case("trace", PATHS, workload="mppi", arms=ARMS,
                                                       run_label="2024-05-06/120000")
    assert (before.mode, after.mode) == ("trace", "trace")
    assert before.subject == "trace cpu/mppi_float_tensor.json.gz" and after.subject == "trace cpu/mppi_from_numpy.json.gz"
    assert subject == f"{before.subject} -> {after.subject}"
    assert len(before.trace.events) and len(after.trace.events)
    assert run_id == "2024-05-06/120000"
    assert labels == ("FloatTensor per sample", "from_numpy + inference_mode")
    assert os.environ["KINETO_LOG_LEVEL"] == "6"  # set before any live recording


def test_without_a_run_label_the_run_id_is_a_new_date_and_time():
    case = open_case("trace", PATHS, workload="mppi", arms=ARMS)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}/\d{6}-[0-9a-f]{6}", case.run_id)  # a random suffix: two runs in one second differ


@pytest.mark.parametrize("kwargs, match", [({"mode": "replay"}, "mode='replay'"), ({"threads": -1}, "threads=-1")])
def test_bad_mode_or_thread_count_is_a_parameter_error(kwargs, match):
    args = {"mode": "trace", **kwargs}
    with pytest.raises(ParameterError, match=re.escape(match)):
        open_case(args.pop("mode"), PATHS, workload="mppi", arms=ARMS, **args)
