"""``perfkit.bench.peaks.measure_peaks`` runs its GEMMs and copies (on the CPU here) and returns what a peaks
file holds; ``perfkit validate --write-peaks`` writes it."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.devices import read_peaks
from perfkit.bench.peaks import measure_peaks
from perfkit.cli import main
from perfkit.errors import ParameterError


def test_measured_peaks_have_every_figure_positive():
    entry = measure_peaks("cpu", size=64, repeats=3, copy_mib=1)["cpu"]
    assert set(entry["matrix"]) == {"bf16", "fp16", "tf32"} and set(entry["vector"]) == {"fp32"}
    assert all(v > 0 for v in [*entry["matrix"].values(), *entry["vector"].values(), entry["mem_bw_gbs"]])


def test_bad_sizes_are_refused():
    with pytest.raises(ParameterError, match="repeats"):
        measure_peaks("cpu", size=64, repeats=1)


def test_validate_writes_a_file_kernels_reads(tmp_path, monkeypatch, capsys):
    import perfkit.cli.validate as validate

    monkeypatch.setattr(validate, "measure_peaks", lambda device: measure_peaks("cpu", size=64, repeats=3, copy_mib=1))
    assert main(["validate", "--device", "cpu", "--write-peaks", str(tmp_path / "p.json")]) == 0
    assert "perfkit gpu-kernels --peaks" in capsys.readouterr().out
    assert set(read_peaks(tmp_path / "p.json")) == {"cpu"}
