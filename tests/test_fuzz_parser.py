"""Fuzz: the trace parser's hostile inputs (issue 16). Truncating a plain .json while perfkit read
it (memory-mapped) killed it with SIGBUS; 100k nested brackets in args, metadata or the salvage
path raised RecursionError; a 5 MB gzip of 5 GiB of spaces ran out of memory at 3.6 GB. Each case
runs `perfkit summary` in a subprocess under resource limits and must end in a one-line error
naming the file (and the limit to raise, for a budget), never a traceback or a signal."""
import gzip
import json
import zlib

import pytest

from fuzzkit import Budget, event, kineto_text, run_cli, run_python

DEEP = 100_000
SMALL = Budget(mem_mb=1536, cpu_s=60, wall_s=60)


def many_events(n: int) -> list[dict]:
    return [event(name=f"aten::op{i % 13}", ts=1_000 + 10 * i, dur=5, args={"External id": i + 1, "Input Dims": [[64, 3, 224, 224]]})
            for i in range(n)]


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(gzip.compress(data, 1) if name.endswith(".gz") else data)
    return path


def spaces_bomb(prefix: bytes, gib: int, suffix: bytes = b"") -> bytes:
    """A one-member gzip stream of ``prefix`` + ``gib`` GiB of spaces + ``suffix``, about 1 MB per
    GiB, built without ever holding the spaces: the compressed form of 16 MiB of spaces after a
    full flush is the same bytes each time, so it is written once and repeated."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(b" " * (16 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert block == deflate.compress(b" " * (16 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.compress(suffix) + deflate.flush()
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + head + block * (gib * 64 - 1) + tail + b"\x00" * 8  # CRC and size: never reached


def test_plain_file_truncated_while_it_is_read(tmp_path):
    """Was SIGBUS (the file was memory-mapped); now an early end of file is a truncated trace."""
    path = write(tmp_path, "t.json", kineto_text(many_events(60_000)))  # ~9 MB: three 4 MB blocks
    code = (
        "import os, sys\n"
        "import perfkit.trace.loader.stream as stream\n"
        "from perfkit.cli import main\n"
        "read = stream.ByteStream._plain\n"
        "def shrinking(self):\n"
        "    for i, block in enumerate(read(self)):\n"
        "        if i == 0:\n"
        "            os.truncate(self.path, self.size // 2)  # another process truncates it mid-read\n"
        "        yield block\n"
        "stream.ByteStream._plain = shrinking\n"
        "sys.exit(main(['summary', '--no-cache', sys.argv[1]]))\n"
    )
    run_python(code, path, budget=SMALL).assert_refused(path, "JSON is cut off", "--salvage")


@pytest.mark.parametrize("where", ["args", "event", "objects", "metadata before", "metadata after"])
@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_deep_nesting_is_refused_by_the_depth_limit(tmp_path, where, name):
    deep = "[" * DEEP + "]" * DEEP
    evs = [json.dumps(event(ts=1_000 + i)) for i in range(5)]
    if where == "args":
        evs[2] = json.dumps(event())[:-1] + ', "args": {"Input Dims": ' + deep + "}}"
    elif where == "event":
        evs[3] = deep
    elif where == "objects":
        evs[1] = '{"a": ' * DEEP + "1" + "}" * DEEP
    text = kineto_text(evs)
    if where == "metadata before":
        text = text.replace(b'{"schemaVersion": 1', b'{"schemaVersion": 1, "deviceProperties": ' + deep.encode())
    if where == "metadata after":
        text = text[:-1] + b', "traceName": ' + deep.encode() + b"}"
    path = write(tmp_path, name, text)
    run_cli("summary", "--no-cache", path, budget=SMALL).assert_refused(path, "nested", "PERFKIT_MAX_NESTING_DEPTH")


def test_deep_nesting_in_a_truncated_file_with_salvage(tmp_path):
    text = kineto_text(many_events(50))
    path = write(tmp_path, "t.json", text[:-3] + b', {"ph": "X", "args": {"x": ' + b"[" * DEEP)
    run_cli("summary", "--salvage", "--no-cache", path, budget=SMALL).assert_refused(
        path, "nested", "PERFKIT_MAX_NESTING_DEPTH")


def test_five_gib_of_spaces_in_five_mb_of_gzip(tmp_path):
    """Was MemoryError at 3.6 GB; now refused after 64 MiB of whitespace."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(spaces_bomb(b"", 5))
    assert bomb.stat().st_size < 6_000_000
    run_cli("summary", "--no-cache", bomb, budget=SMALL).assert_refused(bomb, "whitespace", "PERFKIT_MAX_METADATA_BYTES")


@pytest.mark.parametrize("prefix, suffix, limit", [
    (b'{"traceEvents": [', b"]}", "PERFKIT_MAX_EVENT_BYTES"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}, ', b"{}]}", "PERFKIT_MAX_EVENT_BYTES"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}], "x": "', b'"}', "PERFKIT_MAX_EVENT_BYTES"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]', b'}', "PERFKIT_MAX_EVENT_BYTES"),
    (b'{"deviceProperties": "', b'", "traceEvents": []}', "PERFKIT_MAX_METADATA_BYTES"),
])
def test_gigabytes_of_spaces_inside_the_json(tmp_path, prefix, suffix, limit):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(spaces_bomb(prefix, 2, suffix))
    run_cli("summary", "--no-cache", bomb, budget=SMALL).assert_refused(bomb, limit)


@pytest.mark.parametrize("env, needle", [
    ({"PERFKIT_MAX_DECOMPRESSED_BYTES": "200000"}, "PERFKIT_MAX_DECOMPRESSED_BYTES=800000"),
    ({"PERFKIT_MAX_TABLE_BYTES": "100000"}, "PERFKIT_MAX_TABLE_BYTES=400000"),
    ({"PERFKIT_MAX_NESTING_DEPTH": "3"}, "PERFKIT_MAX_NESTING_DEPTH=12"),
])
def test_each_budget_names_its_variable_and_how_to_raise_it(tmp_path, env, needle):
    path = write(tmp_path, "t.json.gz", kineto_text(many_events(3_000)))  # ~450 KB inflated, nests 4 deep
    run_cli("summary", "--no-cache", path, budget=SMALL, env=env).assert_refused(path, needle)
    run_cli("summary", "--no-cache", path, budget=SMALL).assert_clean(codes=(0,))


def test_one_event_larger_than_the_event_budget(tmp_path):
    evs = many_events(10)
    evs[5]["args"]["Call stack"] = "x" * (24 << 20)  # past the 8 MiB chunk + the 1 MB limit
    path = write(tmp_path, "t.json", kineto_text(evs))
    run_cli("summary", "--no-cache", path, budget=SMALL, env={"PERFKIT_MAX_EVENT_BYTES": "1000000"}).assert_refused(
        path, "without the end of an event", "PERFKIT_MAX_EVENT_BYTES")
    run_cli("summary", "--no-cache", path, budget=SMALL).assert_clean(codes=(0,))
