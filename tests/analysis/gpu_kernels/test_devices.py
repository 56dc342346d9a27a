"""Peaks files (``perfkit.analysis.gpu_kernels.devices``): written and read by one module, refused with the file's
name and what is wrong, and matched to the trace's GPU."""
from __future__ import annotations

import json

import pytest

from perfkit.analysis.gpu_kernels.devices import device_for, read_peaks, write_peaks
from perfkit.errors import ParameterError

H200 = {"NVIDIA H200": {"matrix": {"bf16": 797.0, "tf32": 414.0}, "vector": {"fp32": 50.9}, "mem_bw_gbs": 4272.0,
                        "source": "measured"}}


def test_a_peaks_file_round_trips_and_matches_the_traces_gpu(tmp_path):
    path = write_peaks(tmp_path / "p.json", H200)
    peaks = read_peaks(path)
    dev, name = device_for([{"name": "NVIDIA H200"}], None, peaks)
    assert dev.measured and dev.matrix["bf16"] == 797.0 and name == "NVIDIA H200"
    with pytest.raises(ParameterError, match="holds 'NVIDIA H200', not 'NVIDIA A100-SXM4-80GB'"):
        device_for([{"name": "NVIDIA A100-SXM4-80GB"}], None, peaks)


@pytest.mark.parametrize("doc, says", [
    ("not json", "is not a JSON peaks file"),
    (json.dumps({"NVIDIA H200": H200["NVIDIA H200"]}), "perfkit_peaks"),
    (json.dumps({"perfkit_peaks": 1}), "holds no device"),
    (json.dumps({"perfkit_peaks": 1, "X": {"matrix": {"bf16": -1}, "mem_bw_gbs": 1}}), "matrix.bf16"),
    (json.dumps({"perfkit_peaks": 1, "X": {"matrix": {"bf16": 1}, "mem_bw_gbs": float("inf")}}), "mem_bw_gbs"),
])
def test_a_bad_peaks_file_is_refused_with_its_name(tmp_path, doc, says):
    path = tmp_path / "bad.json"
    path.write_text(doc)
    with pytest.raises(ParameterError, match=says) as err:
        read_peaks(path)
    assert str(path) in str(err.value)


def test_a_missing_peaks_file_says_how_to_make_one(tmp_path):
    with pytest.raises(ParameterError, match="validate --write-peaks"):
        read_peaks(tmp_path / "none.json")
