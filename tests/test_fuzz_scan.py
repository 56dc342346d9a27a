"""Fuzz: `perfkit scan` on hostile trees and sources (issue 16: one dangling link, link loop or
unreadable file aborted the whole scan; a 200k-term expression gave RecursionError; files with a
UTF-8 BOM or a `# -*- coding: latin-1 -*-` line got a false parse error and lost their findings)."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import ESCAPE_NAMES, Budget, can_drop_file_permissions, lock, run_cli, run_main

LOOP = b"import torch\nfor step in range(3):\n    loss = torch.ones(1).item()\n"  # item-in-loop at line 3


def tree(tmp_path):
    (tmp_path / "good.py").write_bytes(LOOP)
    return tmp_path


def scan_json(*paths) -> tuple[list, str]:
    out = run_main("scan", "--json", *paths)
    out.assert_clean(json_out=True, codes=(0,))
    return out.json(), out.err


def test_a_dangling_link_is_a_note_and_the_scan_goes_on(tmp_path):
    (tree(tmp_path) / "broken.py").symlink_to(tmp_path / "gone.py")
    findings, err = scan_json(tmp_path)
    assert [(os.path.basename(f["file"]), f["line"]) for f in findings] == [("good.py", 3)]
    assert "broken.py: not scanned: a link to a missing file" in err


def test_a_link_loop_is_a_note_and_the_scan_goes_on(tmp_path):
    (tree(tmp_path) / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    findings, err = scan_json(tmp_path)
    assert len(findings) == 1 and "a.py: not scanned" in err and "b.py: not scanned" in err


def test_a_named_dangling_link_is_a_note_not_an_abort(tmp_path):
    (tree(tmp_path) / "broken.py").symlink_to(tmp_path / "gone.py")
    findings, err = scan_json(tmp_path / "good.py", tmp_path / "broken.py")
    assert len(findings) == 1 and "broken.py: not scanned" in err


@pytest.mark.skipif(not can_drop_file_permissions(), reason="cannot run a child that obeys file permissions here")
def test_an_unreadable_file_and_directory_are_notes_and_the_scan_goes_on(tmp_path):
    tree(tmp_path)
    lock(_write(tmp_path / "secret.py", LOOP))
    (tmp_path / "private").mkdir()
    _write(tmp_path / "private" / "x.py", LOOP)
    lock(tmp_path / "private")
    try:
        out = run_cli("scan", tmp_path, drop_file_permissions=True)
    finally:
        (tmp_path / "private").chmod(0o700)
    out.assert_clean(codes=(0,))
    assert "good.py:3: [item-in-loop]" in out.out
    assert "secret.py: not scanned: Permission denied" in out.out
    assert "private: directory not scanned: Permission denied" in out.out


def test_a_pipe_named_like_a_source_is_skipped_not_waited_on(tmp_path):
    os.mkfifo(tree(tmp_path) / "pipe.py")
    out = run_cli("scan", tmp_path, budget=Budget(wall_s=30))
    out.assert_clean(codes=(0,))
    assert "pipe.py: not scanned: not a regular file" in out.out and "good.py:3:" in out.out


def test_a_200k_term_expression_is_a_parse_error_not_a_recursion_error(tmp_path):
    _write(tree(tmp_path) / "deep.py", b"x = " + b"+".join([b"1"] * 200_000) + b"\n")
    findings, _ = scan_json(tmp_path)
    rules = {(os.path.basename(f["file"]), f["rule"]) for f in findings}
    assert rules == {("good.py", "item-in-loop"), ("deep.py", "parse-error")}


def test_a_deep_expression_the_parser_accepts_is_checked_around_its_deep_part(tmp_path):
    _write(tmp_path / "gen.py", LOOP + b"y = " + b"+".join([b"a"] * 1_000) + b"\n")
    findings, err = scan_json(tmp_path)
    assert [(f["line"], f["rule"]) for f in findings] == [(3, "item-in-loop")]
    assert "gen.py:4: code nested more than 200 levels deep was not checked" in err


@pytest.mark.parametrize("header", [b"\xef\xbb\xbf", b"# -*- coding: latin-1 -*-\n# caf\xe9\n",
                                    b"# vim: set fileencoding=cp1252 :\n# \x93quoted\x94\n"],
                         ids=["utf8-bom", "latin-1", "cp1252"])
def test_declared_encodings_parse_and_keep_their_findings(tmp_path, header):
    _write(tmp_path / "enc.py", header + LOOP)
    findings, _ = scan_json(tmp_path)
    lines = header.count(b"\n")
    assert [(f["line"], f["rule"]) for f in findings] == [(3 + lines, "item-in-loop")]


@pytest.mark.parametrize("name", ESCAPE_NAMES[:6])
def test_escapes_in_file_names_do_not_reach_the_terminal(tmp_path, name):
    path = tmp_path / f"{name.replace(chr(0), '0')}.py"
    _write(path, LOOP)
    out = run_main("scan", tmp_path)
    out.assert_clean(codes=(0,))
    assert len(out.out.splitlines()) == 2  # one finding line, one count line: a newline cannot split it


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200), at=st.integers(0, len(LOOP)))
def test_any_bytes_in_a_source_scan_cleanly(tmp_path, data, at):
    _write(tmp_path / "m.py", LOOP[:at] + data + LOOP[at:])
    out = run_main("scan", "--json", tmp_path / "m.py")
    out.assert_clean(json_out=True, codes=(0,))


def _write(path, data: bytes):
    path.write_bytes(data)
    return path
