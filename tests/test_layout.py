"""The package's layout rules (docs/layout.md, ../shared/STYLE.md points 1, 13 and 18), checked on
the source itself: layers point one way, no import cycle (function-level imports counted) between
modules or between subpackages, trace's concepts apart from its loader, imports at the top of modules,
modules under 400 lines."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"
# Which packages each layer may not import (STYLE 1); the CLI and notebook glue sit on top.
FORBIDDEN = {
    "perfkit.trace": ("perfkit.workbook", "perfkit.analysis", "perfkit.workloads", "perfkit.detect", "perfkit.bench",
                      "perfkit.export", "perfkit.report", "perfkit.validation", "perfkit.profiling", "perfkit.cli"),
    "perfkit.analysis": ("perfkit.workbook", "perfkit.bench", "perfkit.export", "perfkit.report", "perfkit.validation",
                         "perfkit.profiling", "perfkit.notebook_setup", "perfkit.cli"),
    "perfkit.bench": ("perfkit.report", "perfkit.validation", "perfkit.profiling", "perfkit.notebook_setup", "perfkit.cli"),
    "perfkit.report": ("perfkit.bench", "perfkit.workloads", "perfkit.detect", "perfkit.validation", "perfkit.profiling",
                       "perfkit.notebook_setup", "perfkit.cli"),
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
    """Modules taken together by subpackage (``analysis/step``, ``analysis/kernels``, ``trace/loader``, ...):
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
    (``load_trace``) and the Parquet export, which loads what it writes, call the loader."""
    callers = {"perfkit.trace", "perfkit.trace.export"}
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
