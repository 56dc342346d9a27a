"""HtoD sweep: the no-GPU path with its host memcpy baseline, the timing loop, findings."""
import pytest

from perfkit.bench.htod import COLUMNS, HOST_MODE, HtoDResult, _warnings, htod_sweep, time_copies
from perfkit.errors import ParameterError

torch = pytest.importorskip("torch")
MIB = 2**20


def test_no_gpu_gives_a_well_formed_empty_table_and_a_host_baseline():
    r = htod_sweep(sizes_bytes=(4096, MIB), repeats=3, device="cpu")
    assert not r.available and r.reason.startswith("no GPU:")
    frame = r.to_frame()
    assert frame.empty and list(frame.columns) == COLUMNS
    host = r.host_frame()
    assert list(host.columns) == COLUMNS
    assert host["size_bytes"].tolist() == [4096, MIB] and set(host["mode"]) == {HOST_MODE}
    assert (host["gbps"] > 0).all() and (host["samples"] == 3).all()
    assert host["gbps"].iloc[1] == pytest.approx(MIB / host["median_s"].iloc[1] / 1e9)
    assert [f.severity for f in r.findings] == ["info"]
    assert "host_memcpy_gbps_max" in r.findings[0].evidence
    html = r._repr_html_()
    assert "no GPU" in html and "not host-to-device" in html
    assert "available=False" in repr(r)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the auto path on a machine without a GPU")
def test_auto_without_gpu_says_why():
    r = htod_sweep(sizes_bytes=(4096,), repeats=1, device="auto", host_baseline=False)
    assert not r.available and "torch.cuda.is_available() is False" in r.reason
    assert r.host_frame().empty and list(r.host_frame().columns) == COLUMNS
    assert any("repeats=1" in w for w in r.warnings)
    cuda = htod_sweep(sizes_bytes=(4096,), repeats=1, device="cuda:0", host_baseline=False)
    assert not cuda.available and cuda.reason.startswith("no GPU")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_sweep_measures_every_cell():
    r = htod_sweep(sizes_bytes=(4096, 4 * MIB), repeats=3)
    assert r.available and len(r.to_frame()) == 6 and (r.to_frame()["gbps"] > 0).all()


@pytest.mark.parametrize("kwargs,match", [(dict(modes=("zero_copy",)), "zero_copy"), (dict(sizes_bytes=(0,)), "sizes"),
                                          (dict(repeats=0), "repeats"), (dict(device="tpu"), "tpu")])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        htod_sweep(**kwargs)


def test_time_copies_with_a_fake_clock():
    calls = {"copy": 0, "sync": 0}
    ticks = iter(range(0, 1000, 2))  # each clock read advances 2 s

    def copy():
        calls["copy"] += 1

    def sync():
        calls["sync"] += 1

    times = time_copies(copy, sync, repeats=3, number=4, clock=lambda: next(ticks))
    assert times == (0.5, 0.5, 0.5)  # 2 s between the reads around 4 copies
    assert calls == {"copy": 1 + 3 * 4, "sync": 1 + 3 * 2}  # one warm-up copy


def _result(pageable_64m_s, pinned_64m_s, small_s=1e-5):
    big = 64 * MIB
    rows = ((4096, "pageable", (small_s,) * 5), (4096, "pinned", (small_s,) * 5),
            (big, "pageable", (pageable_64m_s,) * 5), (big, "pinned", (pinned_64m_s,) * 5))
    return HtoDResult("cuda", True, "", rows, repeats=5)


def test_findings_pinned_gap_and_latency():
    r = _result(pageable_64m_s=0.01, pinned_64m_s=0.004)
    by_sev = {f.severity: f for f in r.findings}
    assert by_sev["medium"].evidence["ratio"] == pytest.approx(2.5)
    assert "pin_memory=True" in by_sev["medium"].fix
    assert "latency-bound" in by_sev["low"].title  # 4 KiB at 0.41 GB/s vs 16.8 GB/s
    frame = r.to_frame()
    assert frame.loc[frame["mode"] == "pinned", "gbps"].iloc[1] == pytest.approx(64 * MIB / 0.004 / 1e9)


def test_findings_when_pinned_does_not_help():
    r = _result(pageable_64m_s=0.005, pinned_64m_s=0.0045, small_s=3e-7)
    assert [f.severity for f in r.findings] == ["info"]


def test_noisy_samples_warn():
    rows = ((MIB, "pageable", (1e-4, 1e-4, 5e-4)),)
    assert "vary more than 2x" in _warnings(rows, 3)[-1]
