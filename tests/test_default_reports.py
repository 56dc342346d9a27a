"""`perfkit run` without parameters runs each investigation on its default input: a shipped trace that
shows the problem the investigation exists for (issue 37). The defaults must resolve, ship in the
wheel, and the reports on them must read like findings: no "No fix needed" on a planted problem, no
nan/None/exponent text, and a card that names the trace it read."""
from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from nbsession import KernelSession, bad_text, outputs, rendered_text
from perfkit import workbook
from perfkit.errors import ParameterError
from perfkit.registry import INVESTIGATIONS
from perfkit.report.card import MIME
from perfkit.report.publish.params import notebook_parameters

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# investigation -> the trace its report must be about (the planted problem, recorded on a GPU)
# Every investigation whose default reads a shipped trace (mode "trace"), with the trace and the device it
# was recorded on: each default trace holds a planted problem.
PLANTED = {"htod": ("gpu/copies_pageable.pt.trace.json.gz", "NVIDIA H200"),
           "gpu_kernels": ("gpu/transformer_bf16.pt.trace.json.gz", "NVIDIA H200"),
           "cpu_bound": ("gpu/dataloader_workers0.pt.trace.json.gz", "NVIDIA H200"),
           "step_anatomy": ("gpu/small_mlp_eager.pt.trace.json.gz", "NVIDIA H200"),
           "sync_points": ("gpu/item_logging.pt.trace.json.gz", "NVIDIA H200"),
           "ranks": ("ddp4_slow_dataloader", "NVIDIA A100-SXM4-80GB")}

def _trace_defaults() -> list[tuple[str, str, str]]:
    out = []
    for name in INVESTIGATIONS:
        declared = notebook_parameters(NOTEBOOKS / f"{name}.py")
        out += [(name, key, declared[key]["default"].strip('"')) for key in ("trace_path", "trace_path_b")
                if key in declared]
    return out


@pytest.mark.parametrize("name, key, default", _trace_defaults())
def test_every_trace_default_resolves_and_ships_in_the_wheel(name, key, default):
    found = workbook.find_trace(default)
    shipped = workbook.SHIPPED_ROOT.resolve()
    assert found.is_relative_to(shipped), f"{name}.{key}={default!r} is not a shipped trace"
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["perfkit"]
    files = [found] if found.is_file() else sorted(p for p in found.rglob("*") if p.is_file())
    for path in files:
        rel = "_workbook/traces/" + path.relative_to(shipped).as_posix()
        assert any(fnmatch(rel, p) for p in patterns), f"{rel} (default of {name}.{key}) is not package data"


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_problems_are_read_from_their_gpu_trace(name):
    assert notebook_parameters(NOTEBOOKS / f"{name}.py")["trace_path"]["default"] == f'"{PLANTED[name][0]}"'


def test_a_gpu_trace_is_found_by_folder_and_named_with_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = workbook.find_trace("gpu/copies_pageable.pt.trace.json.gz")
    assert path == (ROOT / "data/traces/gpu/copies_pageable.pt.trace.json.gz").resolve()
    assert workbook.relative_name(path) == "gpu/copies_pageable.pt.trace.json.gz"
    # the CPU recording of the same workload has the same file name: "gpu/NAME" never falls back to it
    assert workbook.find_trace("gpu/replay_host_normalize.json.gz").parent.name == "gpu"
    assert workbook.find_trace("cpu/replay_host_normalize.json.gz").parent.name == "cpu"
    with pytest.raises(ParameterError, match="cpu/replay_host_normalize.json.gz and gpu/replay_host_normalize.json.gz "
                                             "both have that name"):
        workbook.find_trace("replay_host_normalize.json.gz")  # in both folders: refused, never a guess
    assert workbook.find_trace("copies_pageable.pt.trace.json.gz").parent.name == "gpu"  # in one folder only
    with pytest.raises(ParameterError, match="shipped traces, by name: .*gpu/copies_pinned.pt.trace.json.gz"):
        workbook.find_trace("gpu/mppi_nope.json.gz")
    assert "gpu/transformer_bf16.pt.trace.json.gz" in workbook.shipped_traces()


# -- the reports on the defaults (slow: each executes a notebook) ------------------------------------

@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = KernelSession(tmp_path_factory.mktemp("kernel"))
    yield s
    s.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_default_report_reads_its_planted_problem(session, tmp_path, name):
    nb = session.run(NOTEBOOKS / f"{name}.py", {"perf_log_path": str(tmp_path / "perf_log.csv")})
    trace, device = PLANTED[name]
    card = outputs(nb)[0]["data"][MIME]
    assert card["subject"] == f"trace {trace}" and card["device"] == device
    assert card["fix"] and card["severity"] in ("critical", "high")
    assert trace in outputs(nb)[0]["data"]["text/html"]  # the card says which trace it read
    assert not bad_text(nb), f"{name} report shows them"
    assert "findfont" not in rendered_text(nb)  # matplotlib's font fallback log is not report text
