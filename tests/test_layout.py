"""The package's layout rules (docs/layout.md, ../shared/STYLE.md points 1, 13 and 18), checked on
the source itself: layers point one way, no import cycle (function-level imports counted) between
modules or between subpackages, trace's concepts apart from its loader, imports at the top of modules,
modules under 400 lines; text for people in report/ (the commands' in report/terminal), no private name
imported across modules, report/ writing files only where it publishes."""
import ast
from pathlib import Path

import pytest

from perfkit.registry import INVESTIGATIONS

PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"
# Which packages each layer may not import (STYLE 1); the CLI and notebook glue sit on top.
FORBIDDEN = {
    "perfkit.trace": ("perfkit.workbook", "perfkit.analysis", "perfkit.workloads", "perfkit.detect", "perfkit.bench",
                      "perfkit.export", "perfkit.report", "perfkit.validation", "perfkit.profiling", "perfkit.cli"),
    "perfkit.analysis": ("perfkit.workbook", "perfkit.bench", "perfkit.export", "perfkit.report", "perfkit.validation",
                         "perfkit.profiling", "perfkit.notebook_setup", "perfkit.cli"),
    "perfkit.bench": ("perfkit.report", "perfkit.validation", "perfkit.profiling", "perfkit.notebook_setup", "perfkit.cli"),
    "perfkit.report": ("perfkit.bench", "perfkit.workloads", "perfkit.detect", "perfkit.validation", "perfkit.profiling",
                       "perfkit.notebook_setup", "perfkit.cli", "perfkit.agents"),
    # perfkit mcp reads traces and replies with report/'s text; it measures nothing
    "perfkit.agents": ("perfkit.bench", "perfkit.workloads", "perfkit.detect", "perfkit.validation", "perfkit.profiling",
                       "perfkit.notebook_setup", "perfkit.cli", "perfkit.workbook"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path):
    """(imported perfkit module, inside a function) for every import of perfkit's own modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    in_function = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for sub in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("perfkit")):
            base = ".".join(parts[:-1][:len(parts) - node.level] + ([node.module] if node.module else [])) \
                if node.level else node.module
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                yield target, id(node) in in_function
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("perfkit"):
                    yield alias.name, id(node) in in_function


GRAPH = {name: {t for t, _ in _imports(name, path) if t in MODULES and t != name} for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (the nodes in order, the first repeated at the end), or None."""
    done, active = set(), []

    def visit(node):
        if node in active:
            return active[active.index(node):] + [node]
        if node in done:
            return None
        active.append(node)
        for nxt in sorted(graph.get(node, ())):
            if found := visit(nxt):
                return found
        active.pop()
        done.add(node)
        return None

    return next((found for name in sorted(graph) if (found := visit(name))), None)


def _unit(name: str) -> str:
    """The subpackage (or top-level module) a module belongs to: ``perfkit.analysis.step.queued`` ->
    ``perfkit.analysis.step``, ``perfkit.trace.loader.parse`` -> ``perfkit.trace.loader``."""
    return ".".join(name.split(".")[:3])


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def test_no_import_cycle_counting_function_level_imports():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_between_subpackages():
    """Modules taken together by subpackage (``analysis/step``, ``analysis/gpu_kernels``, ``trace/loader``, ...):
    a subpackage that imports another is never imported back by it, even through other modules, so each
    shared piece has one owner (issue 39.5: ``step`` and ``kernels`` imported each other)."""
    units = {}
    for name, targets in GRAPH.items():
        units.setdefault(_unit(name), set()).update(_unit(t) for t in targets if not _nested(_unit(name), _unit(t)))
    cycle = _cycle(units)
    assert cycle is None, "import cycle between subpackages: " + " -> ".join(cycle)


def test_trace_concepts_never_import_the_loader():
    """``trace/loader`` reads files into a Trace; the concepts beside it (model, schema, steps, intervals,
    nesting, ...) work on loaded tables and never reach into it. Only the package's entry point
    (``load_trace``) calls the loader (the Parquet export, which loads what it writes, is ``export/parquet``)."""
    callers = {"perfkit.trace"}
    wrong = sorted(f"{name} imports {target}" for name, targets in GRAPH.items()
                   if name.startswith("perfkit.trace.") and not name.startswith("perfkit.trace.loader")
                   and name not in callers for target in targets if target.startswith("perfkit.trace.loader"))
    assert not wrong, wrong


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_point_one_way(layer):
    wrong = sorted(f"{name} imports {target}" for name, targets in GRAPH.items() if name.startswith(layer)
                   for target in targets if target.startswith(FORBIDDEN[layer]))
    assert not wrong, wrong


def test_report_never_imports_torch():
    assert not [name for name, path in MODULES.items() if name.startswith("perfkit.report")
                and any(isinstance(n, (ast.Import, ast.ImportFrom)) and "torch" in
                        [a.name.split(".")[0] for a in n.names] + [(getattr(n, "module", "") or "").split(".")[0]]
                        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))]


def test_at_most_30_function_level_imports_of_perfkit_modules():
    inside = sorted(f"{name} -> {target}" for name, path in MODULES.items()
                    for target, in_function in _imports(name, path) if in_function)
    assert len(inside) <= 30, inside


def test_no_module_over_400_lines():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, long


# -- text for people has one home (issue 39, item 4) ---------------------------------------------------------------

# cli/ modules that keep their text, and the layer report/ may not import whose objects that text reads.
TEXT_IN_CLI = {"perfkit.cli.scan": "perfkit.detect", "perfkit.cli.detect": "perfkit.detect",
               "perfkit.cli.profile": "perfkit.profiling"}
# Where report/ writes files: the dated reports, the perf log, a new workbook. Nothing else of report/ writes.
REPORT_WRITERS = ("perfkit.report.publish", "perfkit.report.perflog", "perfkit.report.workbook_init")
WRITER_MODULES = ("perfkit.export", "perfkit.atomic")
WRITE_CALLS = {"write_text", "write_bytes", "atomic_write", "write_text_atomic", "to_csv", "to_parquet"}


def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


def test_command_text_lives_in_report_terminal():
    """What ``perfkit <command>`` prints is built in ``perfkit/report/terminal/<command>.py``; a cli module
    defines no ``format_*`` function, but for the ones in ``TEXT_IN_CLI``, whose text reads objects of a layer
    above report/ (and each of those does import that layer, so the exception stays earned)."""
    cli = [name for name in MODULES if name.startswith("perfkit.cli.") and name not in TEXT_IN_CLI]
    wrong = sorted(f"{name}.{node.name}" for name in cli for node in _tree(name).body
                   if isinstance(node, ast.FunctionDef) and node.name.startswith("format_"))
    assert not wrong, wrong
    unearned = sorted(name for name, layer in TEXT_IN_CLI.items()
                      if not any(t.startswith(layer) for t in GRAPH[name]))
    assert not unearned, unearned


def test_no_module_imports_a_private_name_of_another():
    """A name another module needs is public where it is defined (issue 39.4: ``_STEP_COLUMNS`` went from
    report/tables to report/cpu_bound through a private import)."""
    wrong = sorted(f"{name}: {alias.name} from {node.module or '.'}" for name in MODULES
                   for node in ast.walk(_tree(name))
                   if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("perfkit"))
                   for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__"))
    assert not wrong, wrong


def test_no_report_module_imports_an_investigations_report_module():
    """Each investigation's report module (``report/<name>.py`` for a name of ``INVESTIGATIONS``) is imported by
    no other report module: what two of them share lives in a shared module (``rows``, ``tables``, ``prose``)."""
    investigations = {f"perfkit.report.{name}" for name in INVESTIGATIONS} & set(MODULES)
    assert "perfkit.report.cpu_bound" in investigations
    wrong = sorted(f"{name} imports {target}" for name, targets in GRAPH.items() if name.startswith("perfkit.report")
                   for target in targets & investigations if target != name)
    assert not wrong, wrong


def test_report_writes_files_only_where_it_publishes():
    """report/ presents: outside ``REPORT_WRITERS`` it neither imports a writer (``export``, ``atomic``) nor
    calls one (``write_text``, ``to_csv``, ``open(..., "w")``, ...). The annotated trace is written by
    ``export.annotate``, the notebook's call; ``report.step_anatomy`` only points at it."""
    wrong = []
    for name in MODULES:
        if not name.startswith("perfkit.report") or name.startswith(REPORT_WRITERS):
            continue
        wrong += [f"{name} imports {t}" for t in sorted(GRAPH[name]) if t.startswith(WRITER_MODULES)]
        for node in ast.walk(_tree(name)):
            if not isinstance(node, ast.Call):
                continue
            called = getattr(node.func, "attr", getattr(node.func, "id", ""))
            mode = node.args[1] if called == "open" and len(node.args) > 1 else None
            mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
            writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+")
            if called in WRITE_CALLS or writes:
                wrong.append(f"{name}:{node.lineno} calls {called}")
    assert not wrong, wrong



# -- one name per investigation (issue 39, item 3) -----------------------------------------------------------------

ROOT = PACKAGE.parent
# Investigations whose analysis is not ``analysis/<name>`` (a module or a package), and where it is instead; each is
# a row of docs/layout.md's "one name per investigation" table.
ANALYSIS_ELSEWHERE = {
    "cpu_bound": "analysis/step/cpu_bound: the verdict engine, beside the rules, layers and findings it decides from",
    "step_anatomy": "analysis/step/anatomy: the step in one sentence, over step/'s layers, hotspots, gaps and "
                    "critical path",
    "compile_ab": "bench/compile_ab: a measurement (it runs torch); analysis/compile reads a trace's compile events",
    "amp_regression": "bench/amp_ab: a measurement (it runs both precisions)",
    "validation": "perfkit/validation: runs workloads through bench, detect and analysis, so it sits above them",
}
# Where the investigation-and-command rule below allows one basename on several floors.
FLOORS = ("analysis", "analysis/step", "bench", "export", "report", "report/terminal", "report/plots", "report/perflog",
          "cli")
# Basenames that repeat outside that rule, and why; a new repeat fails until it is named apart or listed here.
SHARED_BASENAMES = {
    "anatomy": "step_anatomy's sentence (analysis/step/anatomy) and its figures (report/plots/anatomy)",
    "findings": "an analysis package's findings beside the result they explain (step, gpu_kernels, trace_diff)",
    "result": "an analysis package's result type beside the analysis that builds it (gpu_kernels, sync_points)",
    "queued": "the GPU time each step queued (analysis/queued) and step/'s judgement of it (analysis/step/queued)",
    "steps": "profiler steps (trace/steps) and the per-step figures (report/plots/steps)",
    "names": "two concerns, not yet named apart: name matching on event columns (trace/names) and the validate "
             "checks' names for --help (validation/names)",
    "registry": "two concerns, not yet named apart: the shipped notebooks (registry) and the reference workloads "
                "(workloads/registry)",
    "scan": "two concerns, not yet named apart: the loader's structural scan of a traceEvents span "
            "(trace/loader/scan) and perfkit scan, the static sync lint (cli/scan)",
    "tables": "two concerns, not yet named apart: the report's shared tables (report/tables) and each rank's step "
              "tables (analysis/ranks/tables)",
    "timing": "two concerns, not yet named apart: the harnesses' timed regions (bench/timing) and how far a perfkit "
              "profile run's step times can be trusted (profiling/timing)",
}


def _layout_table() -> dict[str, str]:
    """docs/layout.md's "one name per investigation" table: investigation -> its row."""
    rows = [line for line in (ROOT / "docs" / "layout.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")]
    return {row.split("`")[1]: row for row in rows}


def test_every_investigation_has_one_name_on_every_floor():
    """Each name of ``INVESTIGATIONS`` has its notebook, its report module and an analysis module or package of
    that name, or an entry of ``ANALYSIS_ELSEWHERE`` saying where its analysis is; docs/layout.md's table has a
    row for each, naming that place."""
    missing = [str(path.relative_to(ROOT)) for name in INVESTIGATIONS
               for path in (ROOT / "notebooks" / f"{name}.py", PACKAGE / "report" / f"{name}.py") if not path.is_file()]
    analysis = {name for name in INVESTIGATIONS if f"perfkit.analysis.{name}" in MODULES}
    missing += [f"perfkit/analysis/{name}" for name in INVESTIGATIONS if name not in analysis | set(ANALYSIS_ELSEWHERE)]
    assert not missing, missing
    assert set(ANALYSIS_ELSEWHERE) <= set(INVESTIGATIONS) - analysis  # no stale exception
    table = _layout_table()
    assert set(table) == set(INVESTIGATIONS)
    unnamed = [name for name, where in ANALYSIS_ELSEWHERE.items() if f"`{where.split(':')[0]}" not in table[name]]
    assert not unnamed, unnamed


def test_no_two_modules_share_a_basename():
    """One name, one concern: a basename repeats only as one investigation's or one command's modules on different
    floors (``analysis/htod``, ``bench/htod``, ``report/htod``; ``cli/gaps``, ``report/terminal/gaps``), or where
    ``SHARED_BASENAMES`` says why (issue 39.3: four ``analyze.py``, two ``classify.py``, two ``rules.py``)."""
    from perfkit.cli import COMMANDS

    where = {}
    for path in PACKAGE.rglob("*.py"):
        if path.stem != "__init__":
            where.setdefault(path.stem, []).append(str(path.parent.relative_to(PACKAGE)).replace("\\", "/"))
    floors = set(INVESTIGATIONS) | set(COMMANDS)
    repeated = {name: dirs for name, dirs in where.items() if len(dirs) > 1}
    wrong = sorted(f"{name}: {sorted(dirs)}" for name, dirs in repeated.items() if name not in SHARED_BASENAMES
                   and not (name in floors and set(dirs) <= set(FLOORS)))
    assert not wrong, wrong
    assert set(SHARED_BASENAMES) <= set(repeated)  # no stale exception
