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
Equivalent mutants (no input can tell them apart from the original) are listed in ``EQUIVALENT``
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
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Equivalent:
    """A mutant no input can tell apart from the original: ``module``'s function ``function``
    (as mutmut names it: ``x_decide``, ``xǁClassǁmethod``) with the text ``before`` (the changed line, stripped,
    or the part of it that changed) turned into ``after``, and why."""
    module: str
    function: str
    before: str
    after: str
    why: str


def _same(module: str, function: str, before: str, afters: tuple, why: str) -> list[Equivalent]:
    """One entry per mutation of ``before`` into each of ``afters``, for one reason."""
    return [Equivalent(module, function, before, after, why) for after in afters]


NAN_SPELLING = 'float("nan") and float("NAN") are the same number: float() reads the name in any case'
RULES = "perfkit/analysis/step/rules.py"
EQUIVALENT: list[Equivalent] = [
    Equivalent(RULES, "x__evidence", 'whole = row["wall_us"] if row["wall_us"] > 0 else float("nan")',
               'whole = row["wall_us"] if row["wall_us"] > 0 else float("NAN")', NAN_SPELLING),
    Equivalent(RULES, "x__evidence", 'wall = whole - warm if whole - warm > 0 else float("nan")',
               'wall = whole - warm if whole - warm > 0 else float("NAN")', NAN_SPELLING),
    Equivalent(RULES, "x__evidence",
               '"median_kernel_us": row.get("median_kernel_us", float("nan")), "tiny_kernel_pct": row["tiny_kernel_pct"],',
               '"median_kernel_us": row.get("median_kernel_us", float("NAN")), "tiny_kernel_pct": row["tiny_kernel_pct"],',
               NAN_SPELLING),
    Equivalent(RULES, "x__evidence", 'steps = row.get("steps", 1) or 1', 'steps = row.get("steps", None) or 1',
               'a missing step count is 1 either way: None or 1 is 1'),
    Equivalent(RULES, "x__evidence", 'steps = row.get("steps", 1) or 1', 'steps = row.get("steps", ) or 1',
               'a missing step count is 1 either way: get() without a default gives None, and None or 1 is 1'),
    Equivalent(RULES, "x_no_fix_verdict",
               'if untraced > max(parts.values()) and max(host, e["comm_exposed_share"]) < SECOND_CAUSE_SHARE:',
               'if untraced >= max(parts.values()) and max(host, e["comm_exposed_share"]) < SECOND_CAUSE_SHARE:',
               'at a tie the host part takes the largest value, and max() keeps the first of equal parts: '
               'host-compute-bound is last, so the verdict and its share are the same'),
]


WARMUP = "perfkit/analysis/step/warmup.py"
SORT_KIND = 'a sort on several columns is a lexsort, stable whatever kind says'
SORTED_GROUPS = 'the frame is already in the order of its groups: sorting them, or not, numbers them the same'
STABLE = 'numpy reads a sort kind by its first letter, in any case: "STABLE" is "stable"'
SAME_INPUT = ('the callers pass the trace\'s own host events and launches, the same tables computed again here '
              '(warmup_events passes its own arguments on)')
DROPPED_INDEX = 'the index column reset_index adds is dropped by the [COLUMNS] selection, or reset after'
SCHEMA_DTYPE = 'the column already has this dtype (trace/schema: step and parent int64, ts_us and dur_us float64)'
EQUIVALENT += [
    *_same(WARMUP, "x__by_name", 'kind="stable"', ('kind=None', 'kind="XXstableXX"', 'kind="STABLE"'), SORT_KIND),
    Equivalent(WARMUP, "x__by_name", ', kind="stable")', ', )', SORT_KIND),
    *_same(WARMUP, "x__by_name", ', sort=False)', (', sort=None)', ', sort=True)', ', )'), SORTED_GROUPS),
    *_same(WARMUP, "x__by_name", 'dtype.kind != "i"', ('dtype.kind == "i"', 'dtype.kind != "XXiXX"',
                                                       'dtype.kind != "I"'),
           'both branches group the same (rank, name) in the same order: the integer one is the fast path'),
    *_same(WARMUP, "x__by_name", ', dtype=bool)', (', dtype=None)', ', )'),
           'group numbers summed as floats name the same groups as integers'),
    *_same(WARMUP, "x__inside_another", 'depth = 0', ('depth = 1',), 'the depth guard only stops a cycle of '
           'parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'and depth < 10_000', ('or depth < 10_000', 'and depth <= 10_000',
                                                               'and depth < 10001'),
           'the depth guard only stops a cycle of parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'depth += 1', ('depth = 1', 'depth -= 1', 'depth += 2'),
           'the depth guard only stops a cycle of parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'if parent in parents.index else -1',
           ('if (parent in parents.index) or True else -1', 'if parent in parents.index else +1',
            'if parent in parents.index else -2'),
           'inside the loop a parent (>= 0) is a label of the events table, always in its index'),
    *_same(WARMUP, "x__text_order_codes", 'kind="stable")', ('kind=None)', 'kind="STABLE")'),
           'the names argsort orders are distinct (factorize\'s uniques): no ties for stability to keep'),
    Equivalent(WARMUP, "x__text_order_codes", ', kind="stable")', ', )',
               'the names argsort orders are distinct (factorize\'s uniques): no ties for stability to keep'),
    *_same(WARMUP, "x_cold_first_steps", 'sort=False', ('sort=None',), 'pandas reads sort=None as False'),
    *_same(WARMUP, "x_cold_first_steps", '< 1 + MIN_LATER_STEPS', ('< 1 - MIN_LATER_STEPS',),
           'a rank with one full step has no later median (NaN: no row); with two, the second is a stub beside a '
           'first 10x longer (trace.steps.stub_steps), so the rank has one full step'),
    *_same(WARMUP, "x_warmup_calls", 'host_events(trace, categories)', ('host_events(trace, )',),
           'the default categories hold these, and the `mine` mask keeps only these'),
    *_same(WARMUP, "x_warmup_calls", 'if host is None', ('if (host is None) or True',), SAME_INPUT),
    *_same(WARMUP, "x_warmup_calls", 'if links is None', ('if (links is None) or True',), SAME_INPUT),
    *_same(WARMUP, "x_warmup_events", 'host=host, links=links', ('host=None, links=links', 'links=links',
                                                                 'host=host, links=None', 'host=host, '),
           SAME_INPUT),
    *_same(WARMUP, "x_warmup_calls", '.fillna(np.inf)', ('.fillna(None)',),
           'a NaN median (no later call) fails `dur >= max(10 * NaN, 1000)` as an infinite one does'),
    *_same(WARMUP, "x_warmup_calls", 'fillna(0)', ('fillna(None)', 'fillna(1)'),
           'NaN and 1 later calls are under MIN_LATER as 0 is'),
    *_same(WARMUP, "x_warmup_calls", '(count - 1 >= MIN_LATER)', ('(count + 1 >= MIN_LATER)',),
           'a launch\'s later calls (count - 1, its `size`) are held to MIN_LATER again in `hit`'),
    *_same(WARMUP, "x_warmup_calls", '.reset_index(drop=True)', ('.reset_index(drop=None)',
                                                                 '.reset_index(drop=False)'), DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_calls", 'kind="stable"', ('kind="STABLE"',), STABLE),
    *_same(WARMUP, "x_warmup_calls", 'dtype=np.int64)', ('dtype=None)',), SCHEMA_DTYPE),
    *_same(WARMUP, "x_warmup_calls", 'dtype=np.float64)', ('dtype=None)',), SCHEMA_DTYPE),
    *_same(WARMUP, "x_warmup_calls", 'fill_value=-1)', ('fill_value=None)', 'fill_value=-2)', ')'),
           'a call that launched nothing is then NaN or -2, and `kernel >= 0` is False for both, as for -1'),
    *_same(WARMUP, "x_warmup_calls", '"group", sort=False)', ('"group", sort=None)', '"group", sort=True)',
                                                              '"group", )'), SORTED_GROUPS),
    *_same(WARMUP, "x_warmup_events", 'ignore_index=True)', ('ignore_index=None)', 'ignore_index=False)', ')'),
           DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_events", '.reset_index(drop=True)', ('.reset_index(drop=None)',
                                                                  '.reset_index(drop=False)'), DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_events", 'kind="stable"', ('kind="STABLE"',), STABLE),
]


WHATIF = "perfkit/analysis/step/whatif.py"
EQUIVALENT += [
    *_same(WHATIF, "x_whatif", '"whatif"', ('None', '"XXwhatifXX"', '"WHATIF"'),
           'the name only keys the trace\'s cache of derived results, and no other module asks for it'),
    Equivalent(WHATIF, "x__whatif", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    Equivalent(WHATIF, "x__whatif", 'changed[name] = graphs', 'changed[name] = None',
               'only the keys of `changed` are read (_combined applies the fixes again by name)'),
    Equivalent(WHATIF, "xǁWhatIfResultǁto_json", 'if len(self.replay.steps)', 'if (len(self.replay.steps)) or True',
               'the mean of no steps is NaN, which jsonable writes as null, as None'),
    Equivalent(WHATIF, "xǁWhatIfResultǁprediction_json",
               'if self.lead is not None and self.lead.measure', 'if (self.lead is not None and self.lead.measure) or True',
               'where the lead is not the measure it is the top fix (the first deciding fix that applies), and where '
               'there is no lead the top fix, ranked after it, saves under MIN_SAVING too: None'),
    *_same(WHATIF, "xǁWhatIfResultǁstep_verdicts", '.get(lead.fix, 0.0)', ('.get(lead.fix, None)', '.get(lead.fix, )',
                                                                          '.get(lead.fix, 1.0)'),
           'the lead is one of the ranked fixes: the default is never read'),
    Equivalent(WHATIF, "xǁWhatIfResultǁstep_verdicts", 'if lead else 0.0', 'if lead else 1.0',
               'without a lead the verdict is "" whatever lead_share holds (`lead is not None and ...`)'),
]

SYNC_RESULT = "perfkit/analysis/sync_points/result.py"
RECORDS = 'pandas reads to_dict\'s orient in any case: "RECORDS" is "records"'
EQUIVALENT += [
    *(Equivalent(SYNC_RESULT, f, 'to_dict("records")', 'to_dict("RECORDS")', RECORDS)
      for f in ("x_sync_findings", "xǁSyncResultǁto_json")),
]

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
        if eq.module == module and eq.function == function_of(name) and eq.before in before \
                and before.replace(eq.before, eq.after, 1) == after:
            return eq
    return None


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
