"""Coverage-guided fuzzing of perfkit's C decoder (``perfkit/trace/loader/cdecoder.c``, issue 52).

Builds the extension again with clang under AddressSanitizer and libFuzzer's coverage (``-fsanitize=
address,fuzzer-no-link``) into a scratch folder, and runs atheris over its entry point, ``decode(chunk)``,
from a corpus of chunks cut from the shipped traces (three layouts each). Each input is checked two ways:
the sanitizer stops at any read or write out of bounds and any use after free (leak checks are off: the
interpreter's own allocations would drown them);
and whatever the extension reads must give the pure-Python path's tables (``tests/decoders.py``), where
msgspec must not refuse it. An input that fails either is written to ``tests/fixtures/native_fuzz/``
(libFuzzer's ``crash-<sha1>``; a sample of the inputs it grew is kept there too, as ``corpus-*``), which
``tests/trace/test_native.py`` replays through both decoders in CI: fix
the extension, keep the input.

    python benchmarks/fuzz_native.py [--seconds 600] [--corpus DIR] [--max-len 8192]

Needs clang with compiler-rt (Debian/Ubuntu: ``apt install clang libclang-rt-14-dev``; any clang whose
``-print-resource-dir`` holds ``libclang_rt.asan`` and ``libclang_rt.fuzzer_no_main``) and atheris
(``pip install atheris==2.3.0``), neither of which perfkit needs to run. Prints the runs, the coverage
reached and the inputs found; exit status 1 when one was found.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOUND = ROOT / "tests" / "fixtures" / "native_fuzz"
SOURCE = ROOT / "perfkit" / "trace" / "loader" / "cdecoder.c"
CLANGS = ("clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14")
EVENTS_A_SEED = 12
SEEDS_A_TRACE = 8  # chunks of each shipped trace (x3 layouts): the corpus loads in seconds, not minutes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=600, help="how long to fuzz (default 600)")
    ap.add_argument("--corpus", type=Path, help="a corpus folder kept between runs (default: a new scratch one)")
    ap.add_argument("--max-len", type=int, default=8192, help="the largest input, in bytes (default 8192)")
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return _fuzz(args.child)
    clang = next((c for c in CLANGS if shutil.which(c)), None)
    if clang is None or importlib.util.find_spec("atheris") is None:
        print("needs clang with compiler-rt and atheris: apt install clang libclang-rt-14-dev; "
              "pip install atheris==2.3.0", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="perfkit-fuzz-") as scratch:
        work = Path(scratch)
        runtime = _runtime(clang, work)
        extension = _instrumented(clang, work)
        corpus = args.corpus or work / "corpus"
        seeds = _seed(corpus, args.max_len)
        FOUND.mkdir(parents=True, exist_ok=True)
        before = set(FOUND.iterdir())
        env = {**os.environ, "LD_PRELOAD": str(runtime), "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
        command = [sys.executable, __file__, "--child", str(extension), str(corpus), f"-max_total_time={args.seconds}",
                   f"-max_len={args.max_len}", f"-artifact_prefix={FOUND}/", "-timeout=10", "-rss_limit_mb=4096",
                   "-print_final_stats=1"]
        print(f"fuzzing {SOURCE.name} for {args.seconds} s from {seeds} seed chunks ({clang}, ASan)", flush=True)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        found = sorted(set(FOUND.iterdir()) - before)
    log = done.stdout + done.stderr
    runs = re.findall(r"^#(\d+)\s+(?:DONE|pulse|NEW|REDUCE)\s+cov: (\d+) ft: (\d+)", log, re.M)
    if runs:
        print(f"runs: {int(runs[-1][0]):,}; coverage: {runs[-1][1]} edges, {runs[-1][2]} features")
    for path in found:
        print(f"found: {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes)")
    if done.returncode != 0 or found:
        print(log[-4000:], file=sys.stderr)
        return 1
    print("found nothing")
    return 0


def _runtime(clang: str, work: Path) -> Path:
    """ASan and libFuzzer in one shared library (as atheris's own build makes it): preloaded, it gives the
    instrumented extension its sanitizer and its coverage callbacks."""
    resource = Path(subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True,
                                   check=True).stdout.strip()) / "lib" / "linux"
    merged, objects = work / "asan_with_fuzzer.a", work / "objects"
    objects.mkdir()
    shutil.copy(resource / "libclang_rt.asan-x86_64.a", merged)
    subprocess.run(["ar", "x", str(resource / "libclang_rt.fuzzer_no_main-x86_64.a")], cwd=objects, check=True)
    subprocess.run(["ar", "r", str(merged), *sorted(p.name for p in objects.iterdir())], cwd=objects, check=True,
                   capture_output=True)
    subprocess.run(["ar", "d", str(merged), "asan_preinit.cpp.o", "asan_preinit.cc.o"], check=False,
                   capture_output=True)  # a .preinit_array cannot go in a shared library
    out = work / "asan_with_fuzzer.so"
    subprocess.run([clang, "-Wl,--whole-archive", str(merged), "-Wl,--no-whole-archive", "-lpthread", "-ldl",
                    "-lstdc++", "-lm", "-shared", "-o", str(out)], check=True)
    return out


def _instrumented(clang: str, work: Path) -> Path:
    env = {**os.environ, "CC": clang, "LDSHARED": f"{clang} -shared", "LDFLAGS": "",
           "CFLAGS": "-fsanitize=address,fuzzer-no-link -fno-omit-frame-pointer -g -O1"}
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(work / "lib"), "--build-temp",
                    str(work / "tmp")], cwd=ROOT, env=env, check=True, capture_output=True)
    return next((work / "lib").rglob("cdecoder*.so"))


def _seed(corpus: Path, max_len: int) -> int:
    """Chunks of the shipped traces' events, in Kineto's layout, one event a line and one line; and the
    inputs found before."""
    corpus.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted((ROOT / "data" / "traces").rglob("*.json.gz")):
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        for start in range(0, min(len(events), SEEDS_A_TRACE * EVENTS_A_SEED), EVENTS_A_SEED):
            part = events[start:start + EVENTS_A_SEED]
            for k, text in enumerate((json.dumps(part, indent=2), "[" + ",\n".join(map(json.dumps, part)) + "]",
                                      json.dumps(part))):
                data = text.encode()[:max_len]
                (corpus / f"{path.stem}-{start}-{k}").write_bytes(data)
                count += 1
    for path in FOUND.glob("*"):
        shutil.copy(path, corpus / f"found-{path.name}")
        count += 1
    return count


def _fuzz(argv: list[str]) -> int:
    """In the child, under the preloaded runtime: each input through the instrumented extension, and what
    it reads compared with the pure path."""
    import atheris

    spec = importlib.util.spec_from_file_location("perfkit.trace.loader.cdecoder", argv[0])
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    from decoders import assert_same_decoding
    from perfkit.trace.loader import decode, native
    from perfkit.trace.loader.fields import NativeFields

    native.cdecoder = extension

    def one(data: bytes) -> None:
        read = extension.decode(data)
        if isinstance(read, str):  # refused: msgspec decodes it, or says what is wrong
            return
        theirs = decode.decode_python(data)
        if isinstance(theirs, decode.ChunkFailure):
            raise AssertionError(f"the extension read a chunk msgspec refuses: {theirs}")
        assert_same_decoding(decode._built(NativeFields(read)), theirs, data)

    atheris.Setup([sys.argv[0], *argv[1:]], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
