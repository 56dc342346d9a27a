"""The decoder's choice (perfkit/trace/loader/native.py) and the two decoders' agreement (issue 52): the C
extension and the pure-Python path give identical tables on every shipped and shared trace, on generated odd
events, on broken bytes and on inputs of its fuzzer (benchmarks/fuzz_native.py; tests/fixtures/native_fuzz/: a
crash it finds is kept there as crash-<sha1>, and 64 of the inputs it grew are kept as corpus-*); each chunk the
hostile suites decode is compared too (tests/decoders.py, watched in tests/conftest.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import ROOT, shared_traces
from decoders import assert_same_decoding
from fuzzkit import run_main
from perfkit.errors import ParameterError
from perfkit.trace import load_trace
from perfkit.trace.loader import decode, native

BUILT = pytest.mark.skipif(not native.built(), reason="perfkit's C extension is not built here (no compiler at "
                                                      "install time): only the pure-Python decoder to test")
SHIPPED = sorted((ROOT / "data" / "traces").rglob("*.json.gz"))
FUZZ_FOUND = sorted((ROOT / "tests" / "fixtures" / "native_fuzz").glob("*"))
ODD = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


# --- which decoder -----------------------------------------------------------------------------------

@pytest.mark.parametrize("wanted, built, expected", [
    ("", True, "native"), ("", False, "python"), ("python", True, "python"), ("python", False, "python"),
    ("native", True, "native"), (" Native ", True, "native"), ("PYTHON", False, "python"),
])
def test_the_decoder_chosen(monkeypatch, wanted, built, expected):
    monkeypatch.setenv(native.ENV, wanted)
    monkeypatch.setattr(native, "cdecoder", native.cdecoder if built else None)
    if built and native.cdecoder is None:
        pytest.skip("the C extension is not built here")
    assert native.chosen() == expected


@pytest.mark.parametrize("wanted, built, needle", [
    ("native", False, "is not built"), ("rust", True, "one of native, python"), ("c", False, "one of native"),
])
def test_a_decoder_that_cannot_be_had_is_refused(monkeypatch, wanted, built, needle):
    monkeypatch.setenv(native.ENV, wanted)
    monkeypatch.setattr(native, "cdecoder", object() if built else None)
    with pytest.raises(ParameterError, match=needle):
        native.chosen()
    assert native.describe().startswith("decoder: none")


@pytest.mark.parametrize("wanted, built, line", [
    ("", True, "decoder: native (C)"),
    ("python", True, "decoder: python (PERFKIT_DECODER=python; the C extension is built)"),
    ("", False, "decoder: python (the C extension is not built: no compiler at install time)"),
])
def test_the_version_says_which_decoder(monkeypatch, wanted, built, line):
    monkeypatch.setenv(native.ENV, wanted)
    monkeypatch.setattr(native, "cdecoder", object() if built else None)
    out = run_main("--version")
    assert out.rc == 0 and out.stdout.decode().splitlines()[1:] == [line]


def test_loading_without_the_extension_uses_the_pure_path(monkeypatch):
    monkeypatch.delenv(native.ENV, raising=False)
    monkeypatch.setattr(native, "cdecoder", None)
    trace = load_trace(SHIPPED[0], use_cache=False, workers=1)
    assert len(trace.events) > 0


def test_forcing_an_unbuilt_extension_fails_the_load_in_one_line(monkeypatch):
    monkeypatch.setenv(native.ENV, "native")
    monkeypatch.setattr(native, "cdecoder", None)
    out = run_main("summary", SHIPPED[0])
    assert out.rc == 2 and b"is not built" in out.stderr and b"Traceback" not in out.stderr


def test_a_machine_without_a_compiler_still_installs(tmp_path):
    """setup.py's extension is optional: a build whose compiler fails leaves the pure path, exit 0."""
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib"),
                           "--build-temp", str(tmp_path / "tmp")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "lib").rglob("cdecoder*"))


# --- the two decoders agree --------------------------------------------------------------------------

def _tables(path, decoder, monkeypatch):
    monkeypatch.setenv(native.ENV, decoder)
    try:
        trace = load_trace(path, use_cache=False, workers=1)
    except Exception as exc:  # noqa: BLE001 - the same failure is what is compared
        return f"{type(exc).__name__}: {exc}"
    return trace


@BUILT
@pytest.mark.parametrize("path", SHIPPED + shared_traces(), ids=lambda p: p.name)
def test_every_trace_loads_to_the_same_tables_by_both_decoders(path, monkeypatch):
    ours, theirs = _tables(path, "native", monkeypatch), _tables(path, "python", monkeypatch)
    assert not isinstance(ours, str) and not isinstance(theirs, str), (ours, theirs)
    for name in ("events", "flows", "steps"):
        pd.testing.assert_frame_equal(getattr(ours, name), getattr(theirs, name), check_exact=True,
                                      check_categorical=True, obj=name)
    assert ours.warnings == theirs.warnings and ours.files == theirs.files


def _chunk(data: bytes, monkeypatch):
    monkeypatch.setenv(native.ENV, "native")
    return decode.decode_chunk(data)


def _assert_agree(data: bytes, monkeypatch) -> None:
    ours = _chunk(data, monkeypatch)
    assert_same_decoding(ours, decode.decode_python(data), data)


NUMBERS = st.one_of(
    st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, 2**64]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([-0.0, 1.5, 1e300, 5e-324, 1669783687464181.0]))
VALUES = st.one_of(NUMBERS, st.none(), st.booleans(), st.text(max_size=8), st.sampled_from(["12", "0x1", "", "1e3"]),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
NAMES = st.one_of(st.text(max_size=12), st.sampled_from(["[memory]", "ProfilerStep#3", "aten::mm", "\x00\x1b[31m",
                                                         "\ud7ff\ue000\U0010ffff"]), NUMBERS, st.none())
CATS = st.one_of(st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cpu_op", "python_function",
                                  "cpu_instant_event", "ac2g", "fwdbwd", "gpu_user_annotation", "user_annotation",
                                  "", "Kernel", "cuda_driver"]), st.text(max_size=4), st.none(), st.integers())
ARG_KEYS = ("External id", "external id", "device", "stream", "correlation", "bytes", "size", "Python parent id",
            "Python id", "Bytes", "rank", "Other")
EVENT_KEYS = {
    "ph": st.one_of(st.sampled_from(list("XisftBEMCIb")), st.none(), st.integers(0, 3), st.text(max_size=2)),
    "cat": CATS, "name": NAMES,
    "pid": st.one_of(st.integers(-3, 2**40), st.sampled_from(["Spans", "Traces", "GPU 0", "1", 2**63, 1.0]),
                     st.none(), st.booleans()),
    "tid": st.one_of(st.integers(-3, 2**40), st.text(max_size=6), st.none(), st.sampled_from([7.5, 2**64])),
    "ts": VALUES, "dur": VALUES, "id": VALUES,
    "args": st.one_of(st.none(), st.dictionaries(st.sampled_from(ARG_KEYS), VALUES, max_size=5), VALUES),
}
EVENTS = st.lists(st.fixed_dictionaries({}, optional=EVENT_KEYS), min_size=1, max_size=12)


# Events of the types Kineto writes, with edge values: the C extension reads every one of them itself.
INTS = st.one_of(st.integers(-2**63, 2**63 - 1), st.sampled_from([0, -1, 2**53, 2**53 + 1, 2**63 - 1, -(2**63)]))
TIMES = st.one_of(INTS, st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1669783687464181.0, -0.0]))
WRITTEN = st.one_of(INTS, st.none(), st.text(max_size=6))  # a string id: read as the pure path reads it
PLAIN = st.lists(st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(list("XisftBEMCI")), "cat": st.one_of(CATS.filter(lambda c: not isinstance(c, int))),
    "name": st.one_of(st.text(max_size=12), st.integers(-5, 2**62), st.none()),
    "pid": st.one_of(st.integers(-3, 2**62), st.text(max_size=6)), "tid": st.one_of(st.integers(-3, 2**62),
                                                                                   st.text(max_size=6)),
    "ts": st.one_of(TIMES, st.none()), "dur": st.one_of(TIMES, st.none()), "id": WRITTEN,
    "args": st.dictionaries(st.sampled_from(ARG_KEYS), WRITTEN, max_size=6)}), min_size=1, max_size=40)


def _dumped(events, ascii_only, spaced) -> bytes:
    text = json.dumps(events, ensure_ascii=ascii_only, indent=2 if spaced else None,
                      separators=None if spaced else (",", ":"))
    return text.encode("utf-8", "surrogatepass")


@BUILT
@ODD
@given(events=EVENTS, ascii_only=st.booleans(), spaced=st.booleans())
@example(events=[{"ph": "X", "ts": 1669783687464181.0, "dur": 3, "name": "k", "cat": "kernel",
                  "args": {"device": 0, "stream": 7, "correlation": 2**53 + 1}}], ascii_only=True, spaced=False)
@example(events=[{"ph": "X", "ts": "12", "dur": None, "args": {"External id": "3", "bytes": 2**64}}],
         ascii_only=False, spaced=True)
def test_odd_events_decode_alike(events, ascii_only, spaced, monkeypatch):
    _assert_agree(_dumped(events, ascii_only, spaced), monkeypatch)


@BUILT
@ODD
@given(events=PLAIN, ascii_only=st.booleans(), spaced=st.booleans())
def test_events_of_kinetos_types_are_read_by_the_extension_alike(events, ascii_only, spaced, monkeypatch):
    data = _dumped(events, ascii_only, spaced)
    assert not isinstance(native.decode(data), str), native.decode(data)
    _assert_agree(data, monkeypatch)


@BUILT
@ODD
@given(events=EVENTS, cut=st.integers(0, 10_000), length=st.integers(0, 8), junk=st.binary(max_size=4))
@example(events=[{"ph": "X", "name": "a"}], cut=9, length=1, junk=b"\xff")
@example(events=[{"ph": "X", "name": "a\\u00e9"}], cut=14, length=2, junk=b"\\ud800")
def test_broken_bytes_fail_alike(events, cut, length, junk, monkeypatch):
    """A chunk with bytes cut out and others put in: the same columns, or the same failure (the C extension
    refuses what it cannot read, and msgspec's error is reported)."""
    data = _dumped(events, True, False)
    at = cut % (len(data) + 1)
    _assert_agree(data[:at] + junk + data[at + length:], monkeypatch)


@BUILT
@pytest.mark.parametrize("path", FUZZ_FOUND, ids=lambda p: p.name)
def test_what_the_fuzzer_found_decodes_alike(path, monkeypatch):
    _assert_agree(path.read_bytes(), monkeypatch)


@BUILT
@pytest.mark.parametrize("data", [b"", b"[", b"]", b"[]", b"[{}]", b"[{]", b"[{}" + b" " * 10, b"[null]", b"[{\"ph\":",
                                  b"\xef\xbb\xbf[]", b"[{\"ph\":\"X\"}]garbage", b"[" + b"[" * 3000 + b"]" * 3000 + b"]"])
def test_degenerate_chunks_decode_alike(data, monkeypatch):
    _assert_agree(data, monkeypatch)


@BUILT
def test_the_extension_never_writes_its_input():
    data = bytearray(b'[{"ph":"X","name":"a\\n","ts":1,"dur":2,"args":{"External id":5}}]')
    before = bytes(data)
    native.decode(memoryview(data))
    assert bytes(data) == before
