"""Mutation score of the modules that decide verdicts, counts and figures (issue 56).

mutmut (pinned in requirements-dev.txt) makes the one-line mutations of each module's functions
(an operator swapped, a number + 1, a constant or an argument replaced by None, a string changed,
a condition forced); each mutant runs against the module's own mirrored test file only, with
``-n 0 -p no:cacheprovider -m "not slow"`` (a test marked slow, end to end through ``ranks()`` or the CLI, is left
out: the file's table tests must do the killing) and ``PERFKIT_SHARED`` pointed at nothing, so every kill comes from
small synthetic evidence in that file, never from ../shared traces or another module's tests.
A module's score is killed / (mutants - equivalent); the goal is 90%. mutmut mutates code inside
functions only: a module-level constant (a threshold's value) is guarded by the tests of the
comparison that reads it, one row each side of the line.

    python benchmarks/mutation.py                    # every module, then the table
    python benchmarks/mutation.py rules warmup       # modules whose path contains a name
    python benchmarks/mutation.py --survivors rules  # also the diff of each mutant no test killed
    python benchmarks/mutation.py --list             # the modules and their own test files
    python benchmarks/mutation.py --jobs 2           # mutants run at once (default: 2)
    python benchmarks/mutation.py --suite htod       # also: how many own-file survivors the wider suite kills

Each module runs in ``build/mutation/<module>/`` (mutmut's copy of the package, its log).
Equivalent mutants (no input can tell them apart from the original) are listed in ``mutation_equivalent.py``
with why, and printed after the table.
"""
from __future__ import annotations

import argparse
import json
import os
import re
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


OWN_ARGS = ["-p", "no:cacheprovider", "-n", "0", "-m", "not slow"]
SUITE_ARGS = ["-p", "no:cacheprovider", "-n", "0"]  # the suite's slow tests too: what CI runs


def mutmut_config(module: str, test_files: list[str], pytest_args: list[str]) -> str:
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["perfkit"]\n'
        f'only_mutate = ["{module}"]\n'
        f"pytest_add_cli_args_test_selection = {json.dumps(test_files)}\n"
        f"pytest_add_cli_args = {json.dumps(pytest_args)}\n"
    )


def workdir(module: str, suffix: str = "") -> Path:
    return WORK / (module.removesuffix(".py").replace("/", ".") + suffix)


def prepare(module: str, test_files: list[str], pytest_args: list[str], suffix: str = "") -> Path:
    """A fresh folder for mutmut: the package and the tests linked, the project's pytest settings
    with the module's mutmut section (mutmut reads its configuration from the working folder)."""
    work = workdir(module, suffix)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in ("perfkit", "tests"):
        (work / name).symlink_to(ROOT / name)
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(pyproject + mutmut_config(module, test_files, pytest_args))
    return work


def dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def importers(module: str) -> set[str]:
    """The package's modules whose source imports ``module`` by name (absolute or relative), and ``module``; not
    ``perfkit`` itself, whose re-exports every test imports."""
    name = dotted(module)
    package, _, leaf = name.rpartition(".")
    found = {name}
    for path in (ROOT / "perfkit").rglob("*.py"):
        text = path.read_text()
        here = dotted(str(path.relative_to(ROOT)))
        if here == "perfkit":
            continue
        if name in text or (here.rpartition(".")[0] == package and re.search(
                rf"from \.{leaf} import|from \. import[^\n]*\b{leaf}\b", text)):
            found.add(here)
    return found


def suite_files(module: str) -> list[str]:
    """The test files that import ``module`` or a module that imports it (by dotted name or ``from package import
    name``), its own test file first."""
    names = importers(module)
    patterns = [re.compile(rf"\b{re.escape(n)}(?![\w.])") for n in names] + [
        re.compile(rf"from {re.escape(n.rpartition('.')[0])} import[^\n]*\b{n.rpartition('.')[2]}\b") for n in names]
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                   if any(pat.search(p.read_text()) for pat in patterns))
    own = MODULES[module]
    return [own] + [f for f in files if f != own]


def run_module(module: str, test_file: str, jobs: int) -> dict:
    if not (ROOT / test_file).exists():
        return {"module": module, "error": f"{test_file} does not exist"}
    work = prepare(module, [test_file], OWN_ARGS)
    mutants, seconds, error = mutate(work, module, jobs)
    if error:
        return {"module": module, "error": error, "seconds": seconds}
    return {"module": module, "seconds": seconds, "mutants": mutants}


def mutate(work: Path, module: str, jobs: int, names: list[str] = ()) -> tuple[dict, float, str]:
    """Run mutmut in ``work`` (every mutant, or the ``names`` given): (status and diff per mutant, seconds, error)."""
    env = dict(os.environ, PERFKIT_SHARED=str(work / "no-shared-traces"), MPLBACKEND="Agg")
    start = time.perf_counter()
    with open(work / "mutmut.log", "w") as log:
        rc = subprocess.call([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *names],
                             cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if rc != 0:
        return {}, seconds, f"mutmut exited {rc}: see {work / 'mutmut.log'}"
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--collect", module], cwd=work, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out), seconds, ""


def run_suite(row: dict, jobs: int) -> None:
    """Each own-file survivor of ``row`` run again against ``suite_files``: ``row["suite_killed"]``, the names the
    suite kills, and ``row["suite_files"]``, ``row["suite_seconds"]``."""
    module = row["module"]
    files = suite_files(module)
    row["suite_files"], row["suite_killed"], row["suite_seconds"] = files, [], 0.0
    names = [name for name, _, _ in row["survivors"]]
    if not names:
        return
    work = prepare(module, files, SUITE_ARGS, ".suite")
    mutants, seconds, error = mutate(work, module, jobs, names)
    row["suite_seconds"] = seconds
    if error:
        row["suite_error"] = error
        return
    row["suite_killed"] = [n for n in names if mutants.get(n, {}).get("status") in KILLED]


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
    """One line per module; ``suite``: of the own file's survivors, how many the wider test files kill (``--suite``),
    and the score counting those."""
    print(f"\n{'module':48} {'mutants':>7} {'killed':>6} {'equiv':>5} {'left':>5} {'score':>6} {'suite':>5} "
          f"{'w/suite':>7} {'s':>5}")
    for r in rows:
        mark = "" if r["score"] >= GOAL else "  < 90%"
        suite, with_suite = ("-", "-") if "suite_killed" not in r else (
            f"{len(r['suite_killed'])}", f"{suite_score(r):.1%}")
        seconds = r["seconds"] + r.get("suite_seconds", 0.0)
        print(f"{r['module'].removeprefix('perfkit/'):48} {r['mutants']:7d} {r['killed']:6d} "
              f"{len(r['equivalent']):5d} {len(r['survivors']):5d} {r['score']:6.1%} {suite:>5} {with_suite:>7} "
              f"{seconds:5.0f}{mark}{'  suite: ' + r['suite_error'] if 'suite_error' in r else ''}")
    for e in errors:
        print(f"{e['module'].removeprefix('perfkit/'):48} error: {e['error']}")
    own = sum(r["seconds"] for r in rows) + sum(e.get("seconds", 0) for e in errors)
    suite = sum(r.get("suite_seconds", 0.0) for r in rows)
    print(f"{len(rows)} modules in {own / 60:.1f} min" + (f", the suite's reruns {suite / 60:.1f} min" if suite else ""))


def suite_score(row: dict) -> float:
    counted = row["mutants"] - len(row["equivalent"])
    return (row["killed"] + len(row["suite_killed"])) / counted if counted else 1.0


def print_equivalents(rows: list[dict]) -> None:
    listed = [(r["module"], name, eq) for r in rows for name, _, eq in r["equivalent"]]
    if not listed:
        return
    print("\nEquivalent mutants (not counted):")
    for module, name, eq in listed:
        print(f"  {name}: {eq.before!r} -> {eq.after!r}\n      {eq.why}")


def print_survivors(rows: list[dict], suite: bool = False) -> None:
    for r in rows:
        for name, m, _ in r["survivors"]:
            note = "" if not suite else " (killed by the suite)" if name in r.get("suite_killed", ()) else " (the suite too)"
            print(f"\n# {name}: {m['status']}{note}\n{m['diff']}")


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
    parser.add_argument("--suite", action="store_true",
                        help="also run each own-file survivor against every test file that imports the module or a "
                             "module importing it (slower), for the 'killed by the suite' column")
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
        if args.suite:
            run_suite(row, args.jobs)
            print(f"  the suite ({len(row['suite_files'])} test files) kills {len(row['suite_killed'])} of "
                  f"{len(row['survivors'])} survivors ({row['suite_seconds']:.0f} s)", flush=True)
    if args.survivors:
        print_survivors(rows, args.suite)
    print_table(rows, errors)
    print_equivalents(rows)
    if args.json:
        args.json.write_text(json.dumps(
            [{"module": r["module"], "mutants": r["mutants"], "killed": r["killed"],
              "equivalent": [n for n, _, _ in r["equivalent"]], "survivors": [n for n, _, _ in r["survivors"]],
              "score": r["score"], "seconds": r["seconds"],
              **({"suite_files": r["suite_files"], "suite_killed": r["suite_killed"],
                  "suite_seconds": r["suite_seconds"]} if "suite_killed" in r else {})} for r in rows], indent=1))
    return 0 if not errors and all(r["score"] >= GOAL for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
