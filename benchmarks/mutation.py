"""Mutation score of the modules that decide verdicts, counts and figures (issue 56).

mutmut (pinned in requirements-dev.txt) makes the one-line mutations of each module's functions
(an operator swapped, a number + 1, a constant or an argument replaced by None, a string changed,
a condition forced); each mutant runs against the module's own mirrored test file only, with
``-n 0 -p no:cacheprovider`` and ``PERFKIT_SHARED`` pointed at nothing, so every kill comes from
small synthetic evidence in that file, never from ../shared traces or another module's tests.
A module's score is killed / (mutants - equivalent); the goal is 90%. mutmut mutates code inside
functions only: a module-level constant (a threshold's value) is guarded by the tests of the
comparison that reads it, one row each side of the line.

    python benchmarks/mutation.py                    # every module, then the table
    python benchmarks/mutation.py rules warmup       # modules whose path contains a name
    python benchmarks/mutation.py --survivors rules  # also the diff of each mutant no test killed
    python benchmarks/mutation.py --list             # the modules and their own test files
    python benchmarks/mutation.py --jobs 2           # mutants run at once (default: 2)

Each module runs in ``build/mutation/<module>/`` (mutmut's copy of the package, its log).
Equivalent mutants (no input can tell them apart from the original) are listed in ``mutation_equivalent.py``
with why, and printed after the table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mutation_equivalent import EQUIVALENT, Equivalent

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"

# module -> its own mirrored test file
MODULES = {
    "perfkit/analysis/step/rules.py": "tests/analysis/step/test_rules.py",
    "perfkit/analysis/step/findings.py": "tests/analysis/step/test_findings.py",
    "perfkit/analysis/step/host_work.py": "tests/analysis/step/test_host_work.py",
    "perfkit/analysis/step/warmup.py": "tests/analysis/step/test_warmup.py",
    "perfkit/analysis/step/layers.py": "tests/analysis/step/test_layers.py",
    "perfkit/analysis/step/diagnosis.py": "tests/analysis/step/test_diagnosis.py",
    "perfkit/trace/steps.py": "tests/trace/test_steps.py",
    "perfkit/analysis/sync_points/find.py": "tests/analysis/sync_points/test_find.py",
    "perfkit/analysis/sync_points/result.py": "tests/analysis/sync_points/test_result.py",
    "perfkit/analysis/sync_points/sites.py": "tests/analysis/sync_points/test_sites.py",
    "perfkit/analysis/gpu_kernels/kernel_classes.py": "tests/analysis/gpu_kernels/test_kernel_classes.py",
    "perfkit/analysis/gpu_kernels/flops.py": "tests/analysis/gpu_kernels/test_flops.py",
    "perfkit/analysis/gpu_kernels/opmodel.py": "tests/analysis/gpu_kernels/test_opmodel.py",
    "perfkit/analysis/gpu_kernels/devices.py": "tests/analysis/gpu_kernels/test_devices.py",
    "perfkit/analysis/gpu_kernels/bytes_moved.py": "tests/analysis/gpu_kernels/test_bytes_moved.py",
    "perfkit/analysis/gpu_kernels/args.py": "tests/analysis/gpu_kernels/test_args.py",
    "perfkit/report/perflog/judge.py": "tests/report/perflog/test_judge.py",
    "perfkit/analysis/htod.py": "tests/analysis/test_htod.py",
    "perfkit/analysis/ranks/stragglers.py": "tests/analysis/ranks/test_stragglers.py",
    "perfkit/analysis/ranks/bandwidth.py": "tests/analysis/ranks/test_bandwidth.py",
    "perfkit/analysis/step/segments.py": "tests/analysis/step/test_segments.py",
    "perfkit/analysis/step/graph.py": "tests/analysis/step/test_graph.py",
    "perfkit/analysis/step/gpu_edges.py": "tests/analysis/step/test_gpu_edges.py",
    "perfkit/analysis/step/order.py": "tests/analysis/step/test_order.py",
    "perfkit/analysis/step/simulation.py": "tests/analysis/step/test_simulation.py",
    "perfkit/analysis/step/fixes.py": "tests/analysis/step/test_fixes.py",
    "perfkit/analysis/step/gpu_facts.py": "tests/analysis/step/test_gpu_facts.py",
    "perfkit/analysis/step/whatif.py": "tests/analysis/step/test_whatif.py",
}
GOAL = 0.90
KILLED = {"killed", "timeout"}  # a mutant that hangs its test has been told apart from the original


def mutmut_config(module: str, test_file: str) -> str:
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["perfkit"]\n'
        f'only_mutate = ["{module}"]\n'
        f'pytest_add_cli_args_test_selection = ["{test_file}"]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-n", "0"]\n'
    )


def workdir(module: str) -> Path:
    return WORK / module.removesuffix(".py").replace("/", ".")


def prepare(module: str, test_file: str) -> Path:
    """A fresh folder for mutmut: the package and the tests linked, the project's pytest settings
    with the module's mutmut section (mutmut reads its configuration from the working folder)."""
    work = workdir(module)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in ("perfkit", "tests"):
        (work / name).symlink_to(ROOT / name)
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(pyproject + mutmut_config(module, test_file))
    return work


def run_module(module: str, test_file: str, jobs: int) -> dict:
    if not (ROOT / test_file).exists():
        return {"module": module, "error": f"{test_file} does not exist"}
    work = prepare(module, test_file)
    env = dict(os.environ, PERFKIT_SHARED=str(work / "no-shared-traces"), MPLBACKEND="Agg")
    start = time.perf_counter()
    with open(work / "mutmut.log", "w") as log:
        rc = subprocess.call([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
                             cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if rc != 0:
        return {"module": module, "error": f"mutmut exited {rc}: see {work / 'mutmut.log'}", "seconds": seconds}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--collect", module], cwd=work, env=env,
                         capture_output=True, text=True, check=True).stdout
    mutants = json.loads(out)
    return {"module": module, "seconds": seconds, "mutants": mutants}


def collect(module: str) -> None:
    """Run inside a module's folder: print each mutant's status and, unless killed, its diff."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    data = SourceFileMutationData(path=Path(module))
    data.load()
    mutants = {}
    for name, code in data.exit_code_by_key.items():
        status = status_by_exit_code[code]
        entry = {"status": status}
        if status not in KILLED:
            entry["diff"] = get_diff_for_mutant(name, path=Path(module))
        mutants[name] = entry
    print(json.dumps(mutants))


def function_of(name: str) -> str:
    return name.rpartition(".")[2].partition("__mutmut_")[0]


def changed_lines(diff: str) -> tuple[str, str]:
    lines = diff.splitlines()
    before = " ".join(x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---"))
    after = " ".join(x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++"))
    return before, after


def equivalent_of(module: str, name: str, diff: str) -> Equivalent | None:
    """The entry of ``EQUIVALENT`` that names this mutant: its ``before`` is part of the changed line, and putting
    its ``after`` there gives the mutated line."""
    before, after = changed_lines(diff)
    for eq in EQUIVALENT:
        if eq.module == module and eq.function == function_of(name) and after in _replaced(before, eq.before, eq.after):
            return eq
    return None


def _replaced(text: str, part: str, by: str) -> set[str]:
    """``text`` with one occurrence of ``part`` replaced by ``by``, for each occurrence."""
    found, start = set(), text.find(part)
    while start >= 0:
        found.add(text[:start] + by + text[start + len(part):])
        start = text.find(part, start + 1)
    return found


def summarize(result: dict) -> dict:
    module, mutants = result["module"], result["mutants"]
    killed = sum(m["status"] in KILLED for m in mutants.values())
    equivalent, survivors = [], []
    for name, m in sorted(mutants.items()):
        if m["status"] in KILLED:
            continue
        eq = equivalent_of(module, name, m["diff"])
        (equivalent if eq else survivors).append((name, m, eq))
    counted = len(mutants) - len(equivalent)
    return {"module": module, "mutants": len(mutants), "killed": killed, "equivalent": equivalent,
            "survivors": survivors, "score": killed / counted if counted else 1.0, "seconds": result["seconds"]}


def print_table(rows: list[dict], errors: list[dict]) -> None:
    print(f"\n{'module':48} {'mutants':>7} {'killed':>6} {'equiv':>5} {'left':>5} {'score':>6} {'s':>5}")
    for r in rows:
        mark = "" if r["score"] >= GOAL else "  < 90%"
        print(f"{r['module'].removeprefix('perfkit/'):48} {r['mutants']:7d} {r['killed']:6d} "
              f"{len(r['equivalent']):5d} {len(r['survivors']):5d} {r['score']:6.1%} {r['seconds']:5.0f}{mark}")
    for e in errors:
        print(f"{e['module'].removeprefix('perfkit/'):48} error: {e['error']}")
    total = sum(r["seconds"] for r in rows) + sum(e.get("seconds", 0) for e in errors)
    print(f"{len(rows)} modules in {total / 60:.1f} min")


def print_equivalents(rows: list[dict]) -> None:
    listed = [(r["module"], name, eq) for r in rows for name, _, eq in r["equivalent"]]
    if not listed:
        return
    print("\nEquivalent mutants (not counted):")
    for module, name, eq in listed:
        print(f"  {name}: {eq.before!r} -> {eq.after!r}\n      {eq.why}")


def print_survivors(rows: list[dict]) -> None:
    for r in rows:
        for name, m, _ in r["survivors"]:
            print(f"\n# {name}: {m['status']}\n{m['diff']}")


def selected(names: list[str]) -> dict[str, str]:
    if not names:
        return MODULES
    chosen = {m: t for m, t in MODULES.items() if any(n in m for n in names)}
    if not chosen:
        raise SystemExit(f"no module matches {names}: python benchmarks/mutation.py --list shows them")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="run the modules whose path contains one of these")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--survivors", action="store_true", help="print the diff of every surviving mutant")
    parser.add_argument("--list", action="store_true", help="list the modules and their own test files")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--collect", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.collect:
        collect(args.collect)
        return 0
    modules = selected(args.modules)
    if args.list:
        for module, test_file in modules.items():
            print(f"{module:50} {test_file}")
        return 0
    rows, errors = [], []
    for module, test_file in modules.items():
        result = run_module(module, test_file, args.jobs)
        if "error" in result:
            errors.append(result)
            print(f"{module}: {result['error']}", flush=True)
            continue
        row = summarize(result)
        rows.append(row)
        print(f"{module}: {row['killed']}/{row['mutants']} killed, {len(row['equivalent'])} equivalent, "
              f"{row['score']:.1%} ({row['seconds']:.0f} s)", flush=True)
    if args.survivors:
        print_survivors(rows)
    print_table(rows, errors)
    print_equivalents(rows)
    if args.json:
        args.json.write_text(json.dumps(
            [{"module": r["module"], "mutants": r["mutants"], "killed": r["killed"],
              "equivalent": [n for n, _, _ in r["equivalent"]], "survivors": [n for n, _, _ in r["survivors"]],
              "score": r["score"], "seconds": r["seconds"]} for r in rows], indent=1))
    return 0 if not errors and all(r["score"] >= GOAL for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
