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


# -- each function's branches on small inputs ----------------------------------------------------------------------
from perfkit.analysis.gpu_kernels.devices import DEVICES, Device, _parse_peaks, _positive  # noqa: E402


def test_peak_tflops_reads_the_unit_asked():
    d = Device("k", "n", {"bf16": 10.0}, {"fp32": 2.0}, 100.0)
    assert (d.peak_tflops("bf16", "matrix"), d.peak_tflops("bf16", "vector")) == (10.0, None)
    assert (d.peak_tflops("fp32", "vector"), d.peak_tflops("fp32", "matrix")) == (2.0, None)


def test_ridge_per_unit_and_type():
    d = Device("k", "n", {"bf16": 10.0}, {"fp32": 2.0}, 100.0)
    assert d.ridge == {"matrix_bf16": 10e12 / 100e9, "vector_fp32": 2e12 / 100e9}
    assert Device("k", "n", {"bf16": 10.0}, {}, 0.0).ridge == {"matrix_bf16": None}


def test_device_to_json():
    d = Device("K", "N", {"bf16": 10.0}, {"fp32": 2.0}, 100.0, "datasheet")
    assert d.to_json() == {"name": "N", "key": "K", "peaks": {"matrix": {"bf16": 10.0}, "vector": {"fp32": 2.0}},
                           "mem_bw_gbs": 100.0, "source": "datasheet"}
    assert not d.measured and d.l2_mb == 0.0


def test_datasheet_entries_carry_their_cache_and_floats():
    h100 = DEVICES["H100-SXM"]
    assert (h100.key, h100.name, h100.mem_bw_gbs, h100.l2_mb, h100.measured) == ("H100-SXM", "NVIDIA H100 SXM", 3350.0,
                                                                                50.0, False)
    assert isinstance(h100.mem_bw_gbs, float) and isinstance(h100.l2_mb, float) and h100.source


@pytest.mark.parametrize("name, key", [("", None), (None, None), ("H100-SXM", "H100-SXM"), ("nvidia h100 pcie", "H100-PCIe"),
                                       ("mystery", None), ("A100X", None)])
def test_find_device_by_key_pattern_or_none(name, key):
    found = find_device(name)
    assert (found.key if found else None) == key


def test_device_for_without_peaks():
    assert device_for([]) == (None, "")
    assert device_for([{"name": ""}, {"name": "NVIDIA H100 80GB HBM3"}]) == (DEVICES["H100-SXM"], "NVIDIA H100 80GB HBM3")
    assert device_for([{"name": "NVIDIA H100 80GB HBM3"}], "B200") == (DEVICES["B200"], "B200")
    assert device_for([{"name": "NVIDIA H100 80GB HBM3"}], "NVIDIA A100-SXM4-80GB") == (DEVICES["A100-80GB"],
                                                                                      "NVIDIA A100-SXM4-80GB")
    with pytest.raises(ParameterError, match=r"--device 'mystery' is not a known GPU; use one of: V100-SXM2, V100-PCIe"):
        device_for([{"name": "NVIDIA H100 80GB HBM3"}], "mystery")
    assert device_for([{"name": "mystery GPU"}]) == (None, "mystery GPU")


def test_device_for_with_peaks_by_name_or_by_the_same_card():
    peaks = _parse_peaks({"perfkit_peaks": 1, **H200}, "p.json")
    measured = peaks["NVIDIA H200"]
    assert device_for([{"name": "NVIDIA H200"}], None, peaks) == (measured, "NVIDIA H200")
    assert device_for([{"name": "NVIDIA H200 SXM 141GB"}], None, peaks) == (measured, "NVIDIA H200 SXM 141GB")
    assert device_for([{"name": "x"}], "NVIDIA H200", peaks) == (measured, "NVIDIA H200")
    with pytest.raises(ParameterError, match=r"holds 'NVIDIA H200', not the trace's GPU \(deviceProperties names none\)"):
        device_for([], None, peaks)
    with pytest.raises(ParameterError, match="holds 'NVIDIA H200', not 'mystery'"):
        device_for([{"name": "mystery"}], None, peaks)  # an unknown name is not the same card as any
    unknown = _parse_peaks({"perfkit_peaks": 1, "mystery A": H200["NVIDIA H200"]}, "p.json")
    with pytest.raises(ParameterError, match="not 'mystery B'"):
        device_for([{"name": "mystery B"}], None, unknown)
    assert device_for([{"name": "B200"}], None, {}) == (DEVICES["B200"], "B200")  # no peaks: the datasheet


def test_parsed_peaks_are_measured_with_the_datasheets_cache():
    entry = {"matrix": {"bf16": 797}, "vector": {"fp32": 50.9}, "mem_bw_gbs": 4272}
    (dev,) = _parse_peaks({"perfkit_peaks": 1, "NVIDIA H200": entry}, "where.json").values()
    assert dev == Device("NVIDIA H200", "NVIDIA H200", {"bf16": 797}, {"fp32": 50.9}, 4272.0, "measured (where.json)",
                         True, l2_mb=50.0)
    (other,) = _parse_peaks({"perfkit_peaks": 1, "mystery": dict(entry, source="lab")}, "w").values()
    assert other.l2_mb == 0.0 and other.source == "lab" and other.vector == {"fp32": 50.9}
    (matrix_only,) = _parse_peaks({"perfkit_peaks": 1, "m": {"matrix": {"bf16": 1.0}, "mem_bw_gbs": 1}}, "w").values()
    assert matrix_only.vector == {} and matrix_only.matrix == {"bf16": 1.0}


@pytest.mark.parametrize("doc, says", [
    ([], "expected {\"perfkit_peaks\": 1, ...} as perfkit validate --write-peaks writes it"),
    ({"perfkit_peaks": 2, **H200}, "expected"),
    ({"perfkit_peaks": 1, "X": "fast"}, "the entry 'X' is not an object"),
    ({"perfkit_peaks": 1, "X": {"mem_bw_gbs": 1.0}}, "'X' needs positive finite numbers (mem_bw_gbs or every TFLOP/s "
                                                     "figure is not)"),
    ({"perfkit_peaks": 1, "X": {"matrix": {"bf16": 1.0}}}, "mem_bw_gbs or every"),
    ({"perfkit_peaks": 1, "X": {"matrix": {"bf16": 1.0}, "mem_bw_gbs": 0}}, "mem_bw_gbs or every"),
    ({"perfkit_peaks": 1, "X": {"matrix": [1.0], "mem_bw_gbs": 1.0}}, "(matrix.? is not)"),
    ({"perfkit_peaks": 1, "X": {"vector": {"fp32": True}, "mem_bw_gbs": 1.0}}, "(vector.fp32 is not)"),
    ({"perfkit_peaks": 1, "X": {"matrix": {"a": 0, "b": "1"}, "mem_bw_gbs": 1.0}}, "(matrix.a, matrix.b is not)"),
])
def test_parse_peaks_refusals(doc, says):
    with pytest.raises(ParameterError) as err:
        _parse_peaks(doc, "where.json")
    assert says in str(err.value) and "'where.json'" in str(err.value)


@pytest.mark.parametrize("value, ok", [(1, True), (0.5, True), (0, False), (-1.0, False), (float("nan"), False),
                                       (float("inf"), False), (True, False), ("1", False), (None, False)])
def test_positive(value, ok):
    assert _positive(value) is ok


def test_write_peaks_writes_sorted_json_and_refuses_a_bad_entry(tmp_path):
    path = write_peaks(tmp_path / "sub" / "p.json", H200)
    assert path == tmp_path / "sub" / "p.json"
    text = path.read_text()
    assert json.loads(text) == {"perfkit_peaks": 1, **H200} and text.endswith("}\n")
    assert text == json.dumps({"perfkit_peaks": 1, **H200}, indent=1, sort_keys=True) + "\n"
    with pytest.raises(ParameterError, match="'X' is not an object"):
        write_peaks(tmp_path / "bad.json", {"X": 1})
    assert not (tmp_path / "bad.json").exists()


def test_read_peaks_reports_a_file_it_cannot_decode(tmp_path):
    path = tmp_path / "p.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ParameterError, match="is not a JSON peaks file .*: write one with perfkit validate"):
        read_peaks(path)
    with pytest.raises(ParameterError, match=f"peaks file '{tmp_path / 'none.json'}' not found: write one with perfkit "
                                             f"validate --write-peaks {tmp_path / 'none.json'}"):
        read_peaks(tmp_path / "none.json")


def test_a_datasheet_entry_is_built_with_floats_and_no_cache_unless_given():
    from perfkit.analysis.gpu_kernels.devices import _d

    assert _d("K", "N", [("bf16", 1.0)], [("fp32", 2.0)], 900, "sheet") == Device("K", "N", {"bf16": 1.0}, {"fp32": 2.0},
                                                                                    900.0, "sheet", l2_mb=0.0)
    entry = _d("K", "N", {}, {}, "1.5", "s", l2_mb="6")
    assert (entry.mem_bw_gbs, entry.l2_mb) == (1.5, 6.0)


def test_device_for_finds_an_unknown_cards_peaks_by_its_own_name():
    peaks = _parse_peaks({"perfkit_peaks": 1, "mystery A": H200["NVIDIA H200"]}, "p.json")
    assert device_for([{"name": "mystery A"}], None, peaks) == (peaks["mystery A"], "mystery A")


def test_device_for_names_every_card_the_peaks_file_holds_and_what_to_do():
    peaks = _parse_peaks({"perfkit_peaks": 1, "a": H200["NVIDIA H200"], "b": H200["NVIDIA H200"]}, "p.json")
    with pytest.raises(ParameterError) as err:
        device_for([{"name": "mystery"}], None, peaks)
    assert str(err.value) == ("the peaks file holds 'a', 'b', not 'mystery': measure this GPU's peaks with perfkit "
                              "validate --write-peaks FILE on it, or pass --device with a name in the file")


def test_read_peaks_names_the_file_it_cannot_read(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("{")
    with pytest.raises(ParameterError) as err:
        read_peaks(path)
    assert str(err.value).startswith(f"peaks file {str(path)!r} is not a JSON peaks file (")
    assert str(err.value).endswith("): write one with perfkit validate --write-peaks FILE")


def test_write_peaks_makes_its_folders_follows_a_link_and_names_the_file_it_refuses(tmp_path):
    path = write_peaks(tmp_path / "a" / "b" / "p.json", H200)
    assert read_peaks(path) == read_peaks(path)  # written, folders and all
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    write_peaks(tmp_path / "link.json", H200)  # a path the user names: the file it links to is written
    assert (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "real.json").read_text())["perfkit_peaks"] == 1
    with pytest.raises(ParameterError, match=f"peaks file {str(tmp_path / 'bad.json')!r}: the entry 'X'"):
        write_peaks(tmp_path / "bad.json", {"X": 1})


def test_a_peaks_file_is_read_as_utf8_whatever_the_locale(tmp_path):
    import locale

    path = tmp_path / "p.json"
    doc = {"perfkit_peaks": 1, "NVIDIA H200": dict(H200["NVIDIA H200"], source="mesuré à 20 °C")}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: open() without an encoding would fail here
        assert read_peaks(path)["NVIDIA H200"].source == "mesuré à 20 °C"
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
