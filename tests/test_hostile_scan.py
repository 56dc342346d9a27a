"""`perfkit scan` on hostile trees and sources, round 3 (issue 38 item 4, issue 37 item 5): a coding
line whose codec cannot decode the file (`punycode`, `undefined`, `rot13`, an unknown name) ended the
whole tree's scan, also under `perfkit profile --scan`; a folder nested 1,200 deep was a RecursionError;
a 15 MB file under the 16 MiB limit took 87 s and 3.2 GB; and a `.item()` in a function the loop calls
was missed (scan now follows the calls a loop makes to functions of the same file)."""
import os
import textwrap
from pathlib import Path

import pytest

from fuzzkit import Budget, run_cli, run_main
from perfkit.cli import main
from perfkit.detect.static import scan

LOOP = b"import torch\nfor step in range(3):\n    loss = torch.ones(1).item()\n"  # item-in-loop at line 3


def _scan_json(*paths):
    out = run_main("scan", "--json", *paths)
    out.assert_clean(json_out=True, codes=(0,))
    return out.json(), out.err


# --- coding lines ---------------------------------------------------------------------------------

@pytest.mark.parametrize("coding, why", [
    ("punycode", "UnicodeError"), ("undefined", "UnicodeError"), ("rot13", "LookupError"), ("zlib", "LookupError"),
    ("nosuch", "unknown encoding: nosuch"),
])
def test_a_coding_line_that_cannot_decode_the_file_is_a_note_and_the_scan_goes_on(tmp_path, coding, why):
    (tmp_path / "good.py").write_bytes(LOOP)
    (tmp_path / "odd.py").write_bytes(f"# -*- coding: {coding} -*-\n".encode() + LOOP)
    findings, err = _scan_json(tmp_path)
    assert [(Path(f["file"]).name, f["line"]) for f in findings] == [("good.py", 3)]
    assert "odd.py: not scanned:" in err and why in err and "coding line" in err, err


def test_undeclared_non_utf8_bytes_stay_a_parse_error(tmp_path):
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\n")
    [finding] = scan(tmp_path).findings
    assert finding.rule == "parse-error" and "encoding declaration" in finding.message


def test_profile_scan_of_a_script_with_a_bad_coding_line_notes_it(tmp_path, capsys):
    script = tmp_path / "puny.py"
    script.write_bytes(b"# -*- coding: punycode -*-\nprint(1)\n")
    code = main(["profile", "--scan", "--wait", "0", "--warmup", "0", "--active", "1", "--out", str(tmp_path / "t"),
                 str(script)])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err  # the script cannot run; the report still comes
    scanned = out.split("scan of the script:")[1]
    assert "puny.py: not scanned: its coding line names 'punycode'" in scanned


# --- deep and large trees ---------------------------------------------------------------------------

def test_a_folder_nested_1200_deep_is_walked_without_recursion_and_its_depth_bounded(tmp_path):
    deep = str(tmp_path)
    for _ in range(1200):  # one level at a time: pathlib's and os.makedirs' own recursion stops near 1,000
        deep += "/d"
        os.mkdir(deep)
    Path(deep, "bottom.py").write_bytes(LOOP)
    (tmp_path.joinpath(*["d"] * 150) / "reachable.py").write_bytes(LOOP)
    (tmp_path / "top.py").write_bytes(LOOP)
    try:
        findings, err = _scan_json(tmp_path)
    finally:
        _remove_chain(deep, str(tmp_path))
    assert sorted(Path(f["file"]).name for f in findings) == ["reachable.py", "top.py"]
    assert "directory not scanned" in err and "nested 201 levels below" in err and "PERFKIT_MAX_NESTING_DEPTH" in err


def _remove_chain(deep: str, top: str) -> None:
    """Remove the chain bottom-up: shutil.rmtree (pytest's clean-up of old temp folders) recurses too."""
    os.remove(os.path.join(deep, "bottom.py"))
    while deep != top:
        for name in os.listdir(deep):
            os.remove(os.path.join(deep, name))
        os.rmdir(deep)
        deep = os.path.dirname(deep)


def test_walk_order_and_skips_are_those_of_os_walk(tmp_path):
    for rel in ("b/z.py", "b/a.py", "a/y.py", "a.py", ".hidden/h.py", "venv/v.py", "c/__pycache__/p.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(LOOP)
    (tmp_path / "linked").symlink_to(tmp_path / "b", target_is_directory=True)
    report = scan(tmp_path)
    assert [Path(f).relative_to(tmp_path).as_posix() for f in report.files] == ["a.py", "a/y.py", "b/a.py", "b/z.py"]


def test_a_15mb_source_is_refused_before_parsing_in_bounded_memory(tmp_path):
    # It parsed under the old 16 MiB limit: 87 s and 3.2 GB (Python's syntax tree: 200-500 bytes per byte).
    big = tmp_path / "generated.py"
    big.write_bytes(b"import torch\n" + b"for i in range(3):\n    x = y.item() + [1, 2, 3, 4]\n" * 300_000)
    (tmp_path / "good.py").write_bytes(LOOP)
    out = run_cli("scan", tmp_path, budget=Budget(mem_mb=1024))
    out.assert_clean(codes=(0,))
    assert "good.py:3: [item-in-loop]" in out.out
    assert "generated.py: not scanned" in out.out and "PERFKIT_SCAN_MAX_FILE_BYTES" in out.out


def test_the_file_size_limit_can_be_raised(tmp_path, monkeypatch):
    path = tmp_path / "long.py"
    path.write_bytes(LOOP + b"# padding\n" * 250_000)  # 2.5 MB, nearly all comment
    assert scan(path).findings == () and "PERFKIT_SCAN_MAX_FILE_BYTES" in scan(path).warnings[0]
    monkeypatch.setenv("PERFKIT_SCAN_MAX_FILE_BYTES", str(4 << 20))
    assert [f.line for f in scan(path).findings] == [3]


# --- calls the loop makes ---------------------------------------------------------------------------

def _findings(tmp_path, code: str):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(code).lstrip())
    return [(f.line, f.rule, f.message) for f in scan(path).findings]


def test_an_item_in_a_function_the_loop_calls_is_found_as_in_the_loop(tmp_path):
    found = _findings(tmp_path, """
        import torch

        def log_loss(loss):
            print(loss.item())

        def unused(x):
            return x.item()

        for batch in range(10):
            log_loss(torch.ones(1))
        """)
    assert [(line, rule) for line, rule, _ in found] == [(4, "item-in-loop")]
    assert found[0][2].endswith("(in `log_loss`, called from the loop at line 9)")


def test_calls_are_followed_through_methods_and_helpers_of_the_file(tmp_path):
    found = _findings(tmp_path, """
        import torch

        def to_host(x):
            return x.cpu()

        class Trainer:
            def step(self, batch):
                torch.cuda.synchronize()
                return to_host(batch)

            def fit(self, data):
                while self.more():
                    self.step(next(data))

            def more(self):
                return True
        """)
    assert [(line, rule, message.rsplit("(", 1)[1]) for line, rule, message in found] == [
        (4, "item-in-loop", "in `to_host`, called from the loop at line 12)"),
        (8, "sync-in-loop", "in `step`, called from the loop at line 12)")]


def test_a_function_only_defined_in_the_loop_or_called_outside_it_is_not_in_the_loop(tmp_path):
    found = _findings(tmp_path, """
        import torch

        def report(x):
            return x.item()

        for epoch in range(3):
            def closure(x):
                return x.item()
        report(torch.ones(1))
        """)
    assert found == []


def test_ignore_comments_apply_in_the_called_function(tmp_path):
    found = _findings(tmp_path, """
        import torch

        def read(x):
            return x.item()  # perfkit: ignore[item-in-loop]

        for step in range(3):
            read(torch.ones(1))
        """)
    assert found == []
