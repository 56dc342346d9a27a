"""gpu_match: UUID normalization, torch-UUID matching and CUDA_VISIBLE_DEVICES parsing, on fake device lists."""
import sys
from types import SimpleNamespace

import pytest

from perfkit.bench.gpu_match import (display_uuid, loaded_torch_uuids, match_gpus, match_uuids, match_visible,
                                     normalize_uuid)

NVML = ["GPU-7fdffbb4-f8f8-75b4-b298-33e4b31f7749", b"GPU-11112222-0000-0000-0000-000000000001",
        "GPU-7fd00000-0000-0000-0000-000000000002", None]  # NVML 3's UUID could not be read


@pytest.mark.parametrize("value, normalized, shown", [
    ("GPU-7FDFFBB4-f8f8", "7fdffbb4-f8f8", "GPU-7fdffbb4-f8f8"),
    (b"GPU-7fdffbb4-f8f8", "7fdffbb4-f8f8", "GPU-7fdffbb4-f8f8"),
    (" 7fdffbb4-f8f8 ", "7fdffbb4-f8f8", "GPU-7fdffbb4-f8f8"),  # torch's _CUuuid prints no prefix
    ("MIG-abcd-0001", "abcd-0001", "MIG-abcd-0001"),
    (None, None, None), ("GPU-", None, None),
])
def test_normalize_and_display_uuid(value, normalized, shown):
    assert normalize_uuid(value) == normalized and display_uuid(value) == shown


def test_match_uuids_by_normalized_uuid():
    torch_uuids = ["11112222-0000-0000-0000-000000000001", "7FDFFBB4-F8F8-75B4-B298-33E4B31F7749", "dead-beef"]
    assert match_uuids(torch_uuids, NVML) == [1, 0, None]


def test_match_gpus_prefers_torch_and_falls_back_when_nothing_matches():
    m = match_gpus(NVML, torch_uuids=["7fd00000-0000-0000-0000-000000000002"], visible="0")
    assert m.pairs == ((0, 2),) and m.source == "torch device UUIDs" and not m.warnings
    m = match_gpus(NVML, torch_uuids=["dead-beef"], visible="1")
    assert m.pairs == ((0, 1),) and m.source == "CUDA_VISIBLE_DEVICES='1'"
    assert "cuda:0 (UUID GPU-dead-beef) matches no NVML device" in m.warnings[0]
    assert "CUDA_VISIBLE_DEVICES instead" in m.warnings[1]
    assert match_gpus(NVML, torch_uuids=[], visible=None).pairs == ((0, 0), (1, 1), (2, 2), (3, 3))


@pytest.mark.parametrize("visible, nvml", [
    (None, [0, 1, 2, 3]), ("3", [3]), ("2,0", [2, 0]), ("GPU-7fdf", [0]), ("11112222-0", [1]),
    ("11112222", []),  # all digits: an index (out of range), as CUDA reads it
    ("7fd0,1", [2, 1]), ("1,7fd", [1]),  # "7fd" starts two UUIDs: ambiguous, ends the list
    ("0,4,1", [0]), ("3abc", []), ("2x,1", [2, 1]), ("1,,2", [1]),
])
def test_match_visible(visible, nvml):
    assert [n for _, n in match_visible(NVML, visible).pairs] == nvml


@pytest.mark.parametrize("visible, reason", [
    ("", "hides every GPU"), ("-1", "hides every GPU (entry '-1'"), ("-1,0", "hides every GPU"),
    ("0,2,0", "lists NVML device 0 twice"), ("GPU-7fdf,0", "twice"),
])
def test_match_visible_with_no_gpu_says_why(visible, reason):
    m = match_visible(NVML, visible)
    assert m.pairs == () and reason in m.reason


def test_no_nvml_device_leaves_the_reason_to_the_caller():
    for visible in ("0", "-1", "GPU-7fdf"):
        m = match_gpus([], torch_uuids=None, visible=visible)
        assert (m.pairs, m.reason, m.warnings) == ((), None, ())


def test_match_visible_warns_about_ignored_entries_and_mig():
    m = match_visible(NVML, "1,9,0")
    assert m.pairs == ((0, 1),) and "'9', '0' are ignored" in m.warnings[0] and "4 GPUs" in m.warnings[0]
    mig = match_visible(NVML, "MIG-7fdffbb4-0001")
    assert mig.pairs == ((None, 0), (None, 1), (None, 2), (None, 3)) and "MIG" in mig.warnings[0]


class _Cuda:
    def __init__(self, initialized):
        self.initialized = initialized

    def is_initialized(self):
        return self.initialized

    def device_count(self):
        return 1

    def get_device_properties(self, i):
        assert self.initialized, "must not initialize CUDA"
        return SimpleNamespace(uuid="7fdffbb4-f8f8")


def test_loaded_torch_uuids_only_reads_an_initialized_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert loaded_torch_uuids() is None
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=_Cuda(False)))
    assert loaded_torch_uuids() is None
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=_Cuda(True)))
    assert loaded_torch_uuids() == ["7fdffbb4-f8f8"]
