"""Fuzz, round 2: the trace cache (issue 24: stale figures after a same-size edit with the mtime put
back; flipped bytes in a cached events.arrow; a cache entry's JSON replaced by a FIFO hung)."""
import os

import pytest
from fuzzkit import Budget, event, run_cli, run_python, write_trace
from perfkit.trace import load_trace
from perfkit.trace.loader import cache

@pytest.fixture
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    events = [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500)]
    events += [event(name=f"op{i}", ts=1_100 + i, dur=10 + i) for i in range(2_000)]
    path = write_trace(tmp_path / "t.json", events)
    load_trace(path)
    return path


def entry_files(path):
    base = cache.cache_dir() / cache._key(path)
    return base.with_suffix(".json"), f"{base}.events.arrow"


def test_same_size_edit_with_mtime_restored_misses_the_cache(cached):
    before = os.stat(cached)
    data = cached.read_bytes()
    middle = data.index(b'"dur": 1000')  # op990, in the middle: not in the hashed first/last 64 KiB
    cached.write_bytes(data[:middle] + b'"dur": 9000' + data[middle + 11:])
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(cached).st_size == before.st_size and os.stat(cached).st_mtime_ns == before.st_mtime_ns
    trace = load_trace(cached)
    assert trace.events.loc[trace.events["name"] == "op990", "dur_us"].item() == 9000


FLIPS = """
import random, sys
from pathlib import Path
from perfkit.trace import load_trace
from perfkit.trace.loader import cache
path = Path(sys.argv[1])
arrow = f"{cache.cache_dir() / cache._key(path)}.events.arrow"
good = open(arrow, "rb").read()
rng = random.Random(24)
for case in range(int(sys.argv[2])):
    data = bytearray(good)
    for _ in range(rng.randint(1, 30)):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    open(arrow, "wb").write(bytes(data))
    trace = load_trace(path)
    assert len(trace.events) == 2_001, case
    assert trace.events["dur_us"].sum() == 500 + sum(10 + i for i in range(2_000)), case
    good = open(arrow, "rb").read()  # the rebuilt entry, flipped again next round
print("ok")
"""


def test_flipped_bytes_in_cached_events_are_a_miss(cached, tmp_path):
    # In a child with a memory cap: an unchecked corrupt Arrow file can claim a buffer of many GB.
    out = run_python(FLIPS, cached, 40, budget=Budget(mem_mb=1536, wall_s=120),
                     env={"PERFKIT_CACHE_DIR": str(tmp_path / "cache")})
    out.assert_clean(codes=(0,))
    assert out.out.strip() == "ok"


def test_cache_json_replaced_by_a_fifo_is_a_miss_not_a_hang(cached, tmp_path):
    meta, _ = entry_files(cached)
    meta.unlink()
    os.mkfifo(meta)
    out = run_cli("summary", "--json", cached, budget=Budget(wall_s=30),
                  env={"PERFKIT_CACHE_DIR": str(tmp_path / "cache")})
    out.assert_clean(json_out=True, codes=(0,))
    assert out.json()["events"]["total"] == 2_001


def test_cache_json_pointing_at_dev_zero_is_a_miss(cached):
    meta, _ = entry_files(cached)
    meta.unlink()
    meta.symlink_to("/dev/zero")
    assert len(load_trace(cached).events) == 2_001
