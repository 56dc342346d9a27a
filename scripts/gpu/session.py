"""Everything perfkit checks on a real GPU, in one call (a lent GPU gives about 15 minutes in all).

From the repository root::

    OUT=/tmp/gpu-out DEADLINE_S=480 python3 scripts/gpu/session.py [STEP ...]

STEP names a group (``machine peaks train overhead notebooks cases validate record nvml tests``) or one run
of a group (``train:transformer_bf16``); with none, every group runs, in that order (the order of priority
when the lease runs short). Wheels in ``.whl/`` (what the GPU image lacks: orjson, msgspec, isal, papermill,
nbconvert, ...) are installed first. Each step runs under a timeout cut to what is left of DEADLINE_S; its
output goes to ``$OUT/session.log``, and every file it made is packed into ``$OUT/pack-N.tar`` (15 MB each at
most, so each comes back from the device tool). ``train`` keeps each trace as
``traces/gpu/<name>.pt.trace.json.gz`` with perfkit profile's JSON beside it in ``profile/<name>.json``, and each
step's time on the GPU's clock (CUDA events, written by the script) in ``times/<name>.json``.
This script imports nothing of perfkit: it runs perfkit as a user does, in child processes.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/gpu-out"))
DEADLINE_S = float(os.environ.get("DEADLINE_S", "480"))
DEVICE = os.environ.get("DEVICE", "cuda")  # "cpu" tries the script's plumbing on a machine without a GPU
WORK = Path("/tmp/perfkit-gpu")
PACK_BYTES = 15 * 10 ** 6
PK = [sys.executable, "-m", "perfkit"]
GPU = "scripts/gpu"

# name: (perfkit profile options, script and its arguments, time limit in seconds)
TRAIN = {
    "transformer_bf16": ([], "transformer_train.py bf16 20 cuda", 60),
    "transformer_fp32": ([], "transformer_train.py fp32 20 cuda", 60),
    "small_mlp_eager": ([], "small_mlp_train.py eager 20 cuda", 45),
    "small_mlp_reduce_overhead": ([], "small_mlp_train.py reduce-overhead 20 cuda", 120),
    "dataloader_workers0": ([], "dataloader_train.py 0 20 cuda", 60),
    "item_logging": ([], "small_mlp_train.py item-logging 20 cuda", 45),
    "copies_pageable": ([], "copies_train.py pageable 20 cuda", 45),
    "copies_pinned": ([], "copies_train.py pinned 20 cuda", 45),
    "first_call": (["--wait", "0", "--warmup", "0"], "transformer_train.py bf16 3 cuda", 45),
    "dataloader_workers4": ([], "dataloader_train.py 4 20 cuda", 60),
}
# the profiler's own cost: each script's GPU step time without the profiler and with --memory (the default
# schedule's run is train's)
OVERHEAD = {"transformer_bf16": "transformer_train.py bf16 20 cuda", "small_mlp_eager": "small_mlp_train.py eager 20 cuda"}
INVESTIGATIONS = ("cpu_bound", "step_anatomy", "gpu_kernels", "htod", "sync_points", "ranks", "compile_ab",
                  "amp_regression", "memory_leak", "validation")
CASES = ("case_mpc_planner", "case_world_model", "case_nan_checks", "case_steps_per_second", "case_environment")
RUN_NOTEBOOKS = """
import sys
from perfkit.report.publish.runner import run_all
def done(r):
    print(f"notebook {r.name}: {r.status} in {r.duration_s:.1f} s {r.html_path or r.error}", flush=True)
run_all(sys.argv[3:], {"mode": "live", "device": sys.argv[2]}, out_dir=sys.argv[1], progress=False, on_done=done)
"""
START = time.monotonic()


def log(line: str) -> None:
    print(line, flush=True)
    with open(OUT / "session.log", "a") as f:
        f.write(line + "\n")


def step(name: str, limit: float, argv, env=None, stdout_path: Path | None = None) -> int | None:
    """Run ``argv`` under the smaller of ``limit`` and the time left; its output to the log (stdout to
    ``stdout_path`` when given). Returns the exit status (None: skipped or timed out)."""
    left = DEADLINE_S - (time.monotonic() - START)
    limit = min(limit, left)
    if limit < 5:
        log(f"=== {name}: skipped, deadline reached")
        return None
    log(f"=== {name} (limit {limit:.0f} s, at {time.monotonic() - START:.0f} s): {shlex.join(map(str, argv))}")
    t0 = time.monotonic()
    with open(OUT / "session.log", "a") as err, open(stdout_path or os.devnull, "w") as out:
        try:
            rc = subprocess.run(list(map(str, argv)), stdout=out if stdout_path else err, stderr=err,
                                env={**os.environ, **(env or {})}, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = None
        except OSError as exc:
            err.write(f"{exc}\n")
            rc = None
    log(f"=== {name}: rc={rc} in {time.monotonic() - t0:.1f} s")
    return rc


def install_wheels() -> None:
    wheels = sorted(Path(".whl").glob("*.whl"))
    site = Path("/tmp/site")
    if wheels:
        with open(OUT / "session.log", "a") as err:
            installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                        "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(site),
                                        *map(str, wheels)], stdout=err, stderr=err).returncode == 0
        log(f"=== wheels: {len(wheels)} {'installed' if installed else 'NOT installed (see above)'}")
        wheels = wheels if installed else []
    if wheels:
        data = Path("/tmp/wdata")
        for w in wheels:  # --target drops the wheels' data files: nbconvert's HTML templates among them
            with zipfile.ZipFile(w) as z:
                z.extractall(data, [n for n in z.namelist() if ".data/data/share/jupyter/" in n])
        os.environ["JUPYTER_PATH"] = os.pathsep.join(str(p) for p in data.glob("*.data/data/share/jupyter"))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site)] * bool(wheels) + [os.getcwd()])


def machine() -> None:
    step("machine", 30, ["nvidia-smi", "--query-gpu=name,driver_version,uuid,pci.bus_id,clocks.max.sm,power.limit",
                         "--format=csv"])
    step("machine torch", 30, [sys.executable, "-c", "import sys, torch; print(sys.version); print(torch.__version__, "
                               "torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))"])


def peaks() -> None:
    step("peaks", 60, [*PK, "validate", "--device", DEVICE, "--write-peaks", WORK / "peaks.json"])


def _split(script: str) -> tuple[str, list[str]]:
    """(path, arguments) of a TRAIN or OVERHEAD entry, on DEVICE."""
    name, *args = script.split()
    return f"{GPU}/{name}", [DEVICE if a == "cuda" else a for a in args]


def train(only: set[str]) -> None:
    for name, (options, script, limit) in TRAIN.items():
        if only and name not in only:
            continue
        path, args = _split(script)
        out = WORK / "profile" / name
        argv = [*PK, "profile", "--json", "--out", out, *options, path, "--", *args]
        step(f"train:{name}", limit, argv, env={"STEP_TIMES": str(WORK / "times" / f"{name}.json")},
             stdout_path=WORK / "profile" / f"{name}.json")
        for trace in sorted(out.glob("*.pt.trace.json.gz"))[:1]:
            trace.rename(WORK / "traces" / "gpu" / f"{name}.pt.trace.json.gz")


def overhead(only: set[str]) -> None:
    for name, script in OVERHEAD.items():
        if only and name not in only:
            continue
        path, args = _split(script)
        step(f"overhead:{name} plain", 45, [sys.executable, path, *args],
             env={"STEP_TIMES": str(WORK / "times" / f"{name}-plain.json")})
        step(f"overhead:{name} memory", 60, [*PK, "profile", "--json", "--memory", "--out",
                                             WORK / "profile" / f"{name}-memory", path, "--", *args],
             env={"STEP_TIMES": str(WORK / "times" / f"{name}-memory.json")},
             stdout_path=WORK / "profile" / f"{name}-memory.json")


def notebooks(group: str, names, limit: float) -> None:
    """One batch, as ``perfkit run NAMES -p mode live -p device DEVICE`` (each notebook takes the parameters
    it declares); each notebook's time is printed as it ends, so a batch cut short keeps what ran."""
    step(group, limit, [sys.executable, "-c", RUN_NOTEBOOKS, WORK / "reports", DEVICE, *names])


GROUPS = {
    "machine": lambda only: machine(),
    "peaks": lambda only: peaks(),
    "train": train,
    "overhead": overhead,
    "notebooks": lambda only: notebooks("notebooks", INVESTIGATIONS, 240),
    "cases": lambda only: notebooks("cases", CASES, 200),
    "validate": lambda only: step("validate", 200, [*PK, "validate", "--device", "cuda", "--out",
                                                    WORK / "gpu-validation.md", "--json"]),
    "record": lambda only: step("record", 90, [sys.executable, "scripts/record_traces.py", "--device", "cuda",
                                               "--out", WORK / "traces" / "recorded", "--max-mb", "8"]),
    "nvml": lambda only: step("nvml", 30, [sys.executable, f"{GPU}/nvml_probe.py"]),
    "tests": lambda only: step("tests", 90, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                             "tests/test_htod.py", "tests/test_amp_ab.py", "tests/test_bench_compare.py",
                                             "tests/test_environment.py", "tests/test_syncs_runtime.py",
                                             "tests/test_monitor.py", "tests/test_gpu_match.py", "tests/test_runner.py"]),
}


def pack() -> None:
    """Every file under WORK into tars of at most PACK_BYTES (a file larger than that gets a tar of its own)."""
    files = sorted(p for p in WORK.rglob("*") if p.is_file())
    packs, size = [[]], 0
    for p in files:
        if packs[-1] and size + p.stat().st_size > PACK_BYTES:
            packs.append([])
            size = 0
        packs[-1].append(p)
        size += p.stat().st_size
    for i, group in enumerate(g for g in packs if g):
        with tarfile.open(OUT / f"pack-{i}.tar", "w") as tar:
            for p in group:
                tar.add(p, arcname=str(p.relative_to(WORK)))
    log(f"=== packed {len(files)} files into {len([g for g in packs if g])} tars")


def main(argv) -> None:
    for sub in ("profile", "times", "traces/gpu", "reports"):
        (WORK / sub).mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ.update(PYTHONUNBUFFERED="1", MPLBACKEND="Agg", PERFKIT_HOME=str(WORK / "home"))
    install_wheels()
    wanted = argv or list(GROUPS)
    for group in dict.fromkeys(w.split(":")[0] for w in wanted):
        only = {w.split(":", 1)[1] for w in wanted if w.startswith(group + ":")}
        GROUPS[group](only)
    log(f"=== done at {time.monotonic() - START:.0f} s")
    pack()


if __name__ == "__main__":
    main(sys.argv[1:])
