"""Static sync scanner (perfkit.detect.static, rules) and the ``perfkit scan`` command."""
import argparse
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import perfkit.cli
from perfkit.cli import scan as scan_cli
from perfkit.errors import ParameterError
from perfkit.detect.sync_rules import RULES
from perfkit.detect.static import ScanFinding, ScanReport, scan

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
LABELED = sorted(FIXTURES.glob("scan_*.py"))


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_scan_precision", ROOT / "benchmarks" / "bench_scan_precision.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scan_code(tmp_path, code: str, name: str = "snippet.py", **kw) -> set[tuple[int, str]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code).lstrip("\n"))
    return {(f.line, f.rule) for f in scan(path, **kw).findings}


# --- precision and recall on the labeled fixtures ----------------------------------------------

def test_labeled_fixtures_precision_and_recall_at_least_0_9():
    assert len(LABELED) >= 3
    table = load_bench().score(LABELED)
    overall = table["all"]
    assert overall["tp"] >= 60  # the labels were read
    assert overall["precision"] >= 0.9, table
    assert overall["recall"] >= 0.9, table
    assert set(table) - {"all"} == set(RULES) - {"parse-error"}  # every rule is exercised


@pytest.mark.parametrize("path", LABELED, ids=lambda p: p.name)
def test_each_labeled_fixture_at_least_0_9(path):
    overall = load_bench().score([path])["all"]
    assert overall["precision"] >= 0.9 and overall["recall"] >= 0.9, overall


def test_bench_prints_a_row_per_rule(capsys):
    assert load_bench().main([str(LABELED[0])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["rule", "tp", "fp", "fn", "precision", "recall"]
    assert out[-1].split()[0] == "all"


# --- one case per rule: exact lines, positives and look-alike negatives ------------------------

CASES = {
    "item-in-loop": ("""
        import numpy as np, torch
        def f(xs, d):
            for x in xs:
                a = x.sum().item()
                b = np.ones(2).tolist()
                c = [k for k in d.items()]
            return x.item()
        """, {(4, "item-in-loop")}),
    "tensor-condition": ("""
        import torch
        def f(x, xs):
            if torch.isnan(x).any():
                pass
            while x.sum() > 0:
                pass
            if x.shape[0] > 1 and x is not None and len(xs) > 2:
                pass
            y = 1 if x.all() else 0
            assert torch.equal(x, x)
        """, {(3, "tensor-condition"), (5, "tensor-condition"), (9, "tensor-condition"), (10, "tensor-condition")}),
    "print-tensor": ("""
        import torch
        def f(model, x):
            loss = model(x)
            print(loss)
            print(f"{x.mean():.3f}")
            value = loss.item()
            print(value, f"{value}")
            print("%s" % torch.ones(1))
        """, {(4, "print-tensor"), (5, "print-tensor"), (8, "print-tensor")}),
    "legacy-tensor-ctor": ("""
        import torch
        def f(arr, device):
            a = torch.FloatTensor(arr)
            b = torch.tensor(arr).to(device)
            c = torch.from_numpy(arr).to(device, non_blocking=True)
            d = torch.tensor([1, 2]).to(device)
        """, {(3, "legacy-tensor-ctor"), (4, "legacy-tensor-ctor")}),
    "sync-in-loop": ("""
        import torch
        for _ in range(3):
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        """, {(3, "sync-in-loop")}),
    "optimizer-not-fused": ("""
        from torch import optim
        import torch
        a = optim.AdamW([], lr=1)
        b = torch.optim.SGD([], fused=True)
        c = torch.optim.Adam([], foreach=False)
        """, {(3, "optimizer-not-fused")}),
    "no-grad-inference": ("""
        import torch
        def predict(model, x):
            with torch.no_grad():
                return model(x)
        def train_step(model, target, x):
            with torch.no_grad():
                y = target(x)
            model(x).sub(y).pow(2).mean().backward()
        """, {(3, "no-grad-inference")}),
    "blocking-to-device": ("""
        def f(loader, device):
            for x, y in loader:
                x = x.to(device)
                y = y.to(device, non_blocking=True)
                z = x.to(dtype=float)
                w = y.cuda()
            return loader.to(device)
        """, {(3, "blocking-to-device"), (6, "blocking-to-device")}),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_cases(tmp_path, rule):
    code, expected = CASES[rule]
    assert scan_code(tmp_path, code, rules=[rule]) == expected


def test_files_without_torch_and_annotated_host_data_are_not_guessed_as_tensors(tmp_path):
    pandas_only = """
        import pandas as pd
        def summarize(frame, rows):
            for r in rows:
                r.tolist()
            if (frame["ms"] > 0).all():
                print(frame["ms"].mean(), f"{frame.max()}")
        """
    assert scan_code(tmp_path, pandas_only, name="plain.py") == set()
    with_torch = "import torch\n" + textwrap.dedent(pandas_only).lstrip("\n")
    assert scan_code(tmp_path, with_torch, name="mixed.py") == {
        (5, "item-in-loop"), (6, "tensor-condition"), (7, "print-tensor")}
    annotated = with_torch.replace("def summarize(frame, rows):", "def summarize(frame: pd.DataFrame, rows: list):")
    assert scan_code(tmp_path, annotated, name="annotated.py") == {(5, "item-in-loop")}


def test_findings_carry_rule_metadata(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nfor b in []:\n    b.item()\n")
    (finding,) = scan(path).findings
    meta = RULES["item-in-loop"]
    assert finding == ScanFinding(str(path), 3, "item-in-loop", finding.message, meta.severity, meta.fix)
    assert "`.item()`" in finding.message and finding.severity == "high"


# --- ignore comments, parse errors, walking ----------------------------------------------------

def test_ignore_comments(tmp_path):
    found = scan_code(tmp_path, """
        import torch
        for x in []:
            x.item()  # perfkit: ignore
            x.item()  # perfkit: ignore[item-in-loop]
            x.item()  # perfkit: ignore[print-tensor]
            x.item()  # perfkit:ignore[print-tensor, item-in-loop]
            s = "# perfkit: ignore"; x.item()
        """)
    assert found == {(5, "item-in-loop"), (7, "item-in-loop")}


def test_syntax_error_is_a_finding_not_a_crash(tmp_path):
    (tmp_path / "bad.py").write_text("x = 1\ndef broken(:\n    pass\n")
    (tmp_path / "good.py").write_text("import torch\nfor _ in range(2):\n    torch.cuda.synchronize()\n")
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    report = scan(tmp_path)
    rows = [(Path(f.file).name, f.line, f.rule) for f in report.findings]
    assert rows == [("bad.py", 2, "parse-error"), ("good.py", 3, "sync-in-loop"), ("latin1.py", 1, "parse-error")]
    assert report.findings[0].message.startswith("SyntaxError")
    assert "encoding declaration" in report.findings[2].message  # what Python itself says


def test_walk_skips_venv_site_packages_hidden_and_caches(tmp_path):
    loop = "import torch\nfor _ in range(2):\n    x.item()\n"
    for rel in ("pkg/a.py", "pkg/sub/b.py", ".venv/lib/c.py", "lib/site-packages/d.py",
                ".hidden/e.py", "pkg/__pycache__/f.py", "pkg/notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(loop)
    report = scan([tmp_path, tmp_path / "pkg" / "a.py"])
    assert [Path(f).relative_to(tmp_path).as_posix() for f in report.files] == ["pkg/a.py", "pkg/sub/b.py"]
    assert len(report.findings) == 2


def test_bad_arguments(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        scan(tmp_path / "missing")
    with pytest.raises(ParameterError, match="unknown rule"):
        scan(tmp_path, rules=["item-in-loop", "no-such-rule"])
    with pytest.raises(ParameterError):
        scan([])
    empty = scan(tmp_path)
    assert empty.findings == () and empty.warnings == ("no Python files found under the given paths",)


def test_scanning_the_package_itself_parses_every_file():
    report = scan(ROOT / "perfkit")
    assert len(report.files) >= 10
    assert not [f for f in report.findings if f.rule == "parse-error"]


# --- report -----------------------------------------------------------------------------------

def test_report_counts_frame_repr_and_escaped_html():
    findings = (ScanFinding("<a>.py", 3, "item-in-loop", "m <x>", "high", "fix"),
                ScanFinding("b.py", 1, "item-in-loop", "m", "high", "fix"))
    report = ScanReport(findings, ("<a>.py", "b.py"), ("item-in-loop", "sync-in-loop"))
    assert report.counts_by_rule == {"item-in-loop": 2, "sync-in-loop": 0}
    assert list(report.to_frame().columns) == ["file", "line", "rule", "severity", "message", "fix"]
    assert repr(report) == "ScanReport(2 findings in 2 files)"
    html = report._repr_html_()
    assert "&lt;a&gt;.py" in html and "m &lt;x&gt;" in html and "<a>.py" not in html


# --- the CLI ----------------------------------------------------------------------------------

def parse(argv):
    parser = argparse.ArgumentParser(prog="perfkit")
    scan_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_json_shape_and_rule_filter(capsys):
    path = str(FIXTURES / "scan_labeled.py")
    assert scan_cli.run(parse(["scan", path, "--json", "--rules", "sync-in-loop,optimizer-not-fused"])) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"file", "line", "rule", "message", "severity", "fix"} for r in rows)
    assert {r["rule"] for r in rows} == {"sync-in-loop", "optimizer-not-fused"}
    assert [r["line"] for r in rows] == sorted(r["line"] for r in rows)
    expected = {(r["line"], r["rule"]) for r in scan(path).to_records()
                if r["rule"] in ("sync-in-loop", "optimizer-not-fused")}
    assert {(r["line"], r["rule"]) for r in rows} == expected


def test_cli_exit_codes_and_table(tmp_path, capsys):
    dirty = tmp_path / "dirty.py"
    dirty.write_text("import torch\nfor _ in range(2):\n    torch.cuda.synchronize()\n")
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    assert scan_cli.run(parse(["scan", str(dirty)])) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{dirty}:3: [sync-in-loop] `synchronize()` inside a loop waits for the device every iteration"
    assert out[-1] == "1 findings in 1 files (sync-in-loop=1)"
    assert scan_cli.run(parse(["scan", str(dirty), "--fail-on-findings"])) == 1
    assert scan_cli.run(parse(["scan", str(clean), "--fail-on-findings"])) == 0
    with pytest.raises(ParameterError):
        scan_cli.run(parse(["scan", str(dirty), "--rules", "bogus"]))


def test_python_dash_m_perfkit_scan():
    if "scan" not in perfkit.cli.COMMANDS:
        pytest.skip("`scan` is not wired into perfkit.cli.COMMANDS yet")
    proc = subprocess.run([sys.executable, "-m", "perfkit", "scan", "--json", str(FIXTURES / "scan_labeled.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == len(scan(FIXTURES / "scan_labeled.py").findings)
