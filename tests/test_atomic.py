"""``perfkit.atomic``: what the user points perfkit at is written to, never replaced: a symlink is followed,
``-``, a FIFO or a device is streamed to, and a failed write leaves the previous version."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from perfkit.atomic import atomic_write, write_text_atomic
from perfkit.errors import OutputError


def test_a_symlink_is_followed_not_replaced(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text_atomic(link, "new", user_output=True)
    assert link.is_symlink() and real.read_text() == "new"


def test_a_fifo_is_streamed_to_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(Path(fifo).read_text()))
    reader.start()
    write_text_atomic(fifo, "through the pipe", user_output=True)
    reader.join(timeout=30)
    assert got == ["through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dash_is_standard_output(capfdbinary):
    atomic_write("-", lambda tmp: Path(tmp).write_bytes(b"to stdout"), user_output=True)
    assert capfdbinary.readouterr().out == b"to stdout"


def test_a_device_that_refuses_the_bytes_is_an_output_error_and_stays_a_device(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with pytest.raises(OutputError, match="/dev/full"):
        write_text_atomic("/dev/full", "x" * 100_000, user_output=True)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_failed_write_keeps_the_previous_version(tmp_path):
    target = tmp_path / "log.csv"
    target.write_text("previous")

    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space"):
        atomic_write(target, fail)
    assert target.read_text() == "previous" and [p.name for p in tmp_path.iterdir()] == ["log.csv"]


def test_annotate_to_standard_output_keeps_its_message_off_the_stream(tmp_path, capfdbinary):
    from perfkit.cli import main
    from tracebuilder import TraceBuilder

    b = TraceBuilder()
    b.step(0, 0, 100)
    trace = b.write(tmp_path / "t.json")
    assert main(["annotate", str(trace), "-o", "-"]) == 0
    out = capfdbinary.readouterr()
    import json
    assert len(json.loads(out.out)["traceEvents"]) > 1 and b"wrote -" in out.err
