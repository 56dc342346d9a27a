"""Peaks files (``perfkit.analysis.gpu_kernels.devices``): written and read by one module, refused with the file's
name and what is wrong, and matched to the trace's GPU."""
from __future__ import annotations

import json

import pytest

from perfkit.analysis.gpu_kernels import kernels
from perfkit.analysis.gpu_kernels.devices import device_for, find_device, read_peaks, write_peaks
from perfkit.errors import ParameterError
from perfkit.trace import load_trace
from tracebuilder import TraceBuilder

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


@pytest.mark.parametrize("name, key", [
    # each variant the table holds, beside the neighbour whose figures it must not take
    ("NVIDIA GeForce RTX 4090 D", "RTX-4090D"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA H800", "H800"), ("NVIDIA H800 PCIe", "H800-PCIe"), ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    # variants it lacks: no neighbour's figures
    ("NVIDIA H100 NVL", None), ("NVIDIA H200 NVL", None), ("NVIDIA GB200", None), ("Tesla V100S-PCIE-32GB", None),
    ("NVIDIA GeForce RTX 3090 Ti", None), ("NVIDIA RTX 500 Ada Generation Laptop GPU", None),
    ("Tesla V100-DGXS-32GB", "V100-SXM2"), ("NVIDIA A100-PG509-200", "A100-40GB"), ("NVIDIA B200", "B200"),
])
def test_a_device_name_finds_its_own_entry_or_none(name, key):
    found = find_device(name)
    assert (found.key if found else None) == key


def test_an_h800_is_an_h100_with_its_fp64_cut_and_a_4090_d_has_fewer_sms():
    h800, h100 = find_device("NVIDIA H800"), find_device("NVIDIA H100 80GB HBM3")
    assert h800.matrix["bf16"] == h100.matrix["bf16"] and h800.vector["fp64"] == 1.0 < h100.vector["fp64"]
    d, full = find_device("NVIDIA GeForce RTX 4090 D"), find_device("NVIDIA GeForce RTX 4090")
    assert d.matrix["bf16"] == pytest.approx(full.matrix["bf16"] * 114 / 128, rel=0.002)  # 114 of 128 SMs


def test_an_unknown_device_says_use_peaks(tmp_path):
    b = TraceBuilder(gpu_name="NVIDIA RTX 500 Ada Generation Laptop GPU")
    b.step(0, ts=0, dur=100)
    op = b.cpu_op("aten::mm", ts=10, dur=20)
    op["args"].update({"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})
    b.launch("sgemm_kernel", ts=12, dur=5, gpu_ts=30, gpu_dur=10)
    r = kernels(load_trace(b.write(tmp_path / "t.json")))
    assert r.device is None
    assert any(w.startswith("unknown device 'NVIDIA RTX 500 Ada Generation Laptop GPU': use --peaks") for w in r.warnings)
    assert r.ops["pct_of_peak"].isna().all() and r.ops["flops"].iloc[0] == 2 * 64**3
