"""Issue 54, rules 2 and 3: nothing perfkit writes clobbers what it did not make, and runs at once never take
each other's files. Every output path is checked against the inputs and logs of the same command; a link is
followed or refused, never replaced; an existing file keeps its mode and owner; a failed write leaves nothing
half-written; a writer's hidden ``.part`` is removed by the next writer once its own writer is gone; run ids
are unique; a dataset folder gets the mode ``mkdir`` gives."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzkit import event, run_main, write_trace
from perfkit.atomic import atomic_write, refuse_clobber, remove_abandoned, staged, write_text_atomic
from perfkit.errors import OutputError, ParameterError
from perfkit.report.perflog import PerfLog

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


@pytest.fixture
def trace(tmp_path):
    return write_trace(tmp_path / "t.json", [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500),
                                             *(event(name=f"op{i}", ts=1_100 + i, dur=3) for i in range(50))])


# Every writer of a file the user names, as (name, write(target)): each must obey the same rules.
def _writers(trace):
    return {
        "atomic": lambda target: write_text_atomic(target, "new"),
        "user": lambda target: write_text_atomic(target, "new", user_output=True),
        "annotate": lambda target: run_main("annotate", trace, "--no-cache", "-o", target),
        "collapsed": lambda target: run_main("hotspots", trace, "--no-cache", "--collapsed", target),
    }


WRITERS = ("atomic", "user", "annotate", "collapsed")
USER_NAMED = ("user", "annotate", "collapsed")  # "atomic": a path perfkit chose (a cache entry, a report)


@pytest.mark.parametrize("writer", USER_NAMED)
def test_a_link_to_a_file_is_followed_and_stays_a_link(tmp_path, trace, writer):
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    _writers(trace)[writer](link)
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_text() != "old"
    assert not list(tmp_path.glob(".*part")) and not list(tmp_path.glob(".*.new"))


@pytest.mark.parametrize("writer", USER_NAMED)
def test_a_link_to_nothing_yet_is_followed_like_a_shell_redirect(tmp_path, trace, writer):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "made.json")
    _writers(trace)[writer](link)
    assert link.is_symlink() and (tmp_path / "made.json").is_file()


def test_a_loop_of_links_is_refused_and_stays(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(OutputError, match="loop of symbolic links"):
        write_text_atomic(a, "new", user_output=True)
    assert a.is_symlink() and b.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def _special(tmp_path, kind: str) -> Path:
    """A FIFO, or (root only) a character device like /dev/zero, made in ``tmp_path``."""
    node = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(node)
    elif os.geteuid() == 0:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    else:
        pytest.skip("making a device node needs root")
    return node


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_path_perfkit_chose_never_follows_a_planted_link_into_a_device(tmp_path, kind):
    """A cache entry linked to /dev/zero was followed and /dev/zero replaced by a regular file (as root)."""
    node = _special(tmp_path, kind)
    entry = tmp_path / "entry.json"
    entry.symlink_to(node)
    write_text_atomic(entry, "cache")
    assert not entry.is_symlink() and entry.read_text() == "cache"
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISCHR)(os.lstat(node).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_device_or_fifo_where_perfkit_writes_its_own_file_is_refused_not_replaced(tmp_path, kind):
    node = _special(tmp_path, kind)
    with pytest.raises(OutputError, match="not a regular file"):
        write_text_atomic(node, "cache")
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISCHR)(os.lstat(node).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == [kind]


def test_a_planted_link_at_a_path_perfkit_chose_is_replaced_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    (tmp_path / "entry.json").symlink_to(victim)
    write_text_atomic(tmp_path / "entry.json", "cache")
    assert victim.read_text() == "theirs" and not (tmp_path / "entry.json").is_symlink()


def test_a_loop_of_links_is_one_line_from_every_command(tmp_path, trace):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    for command in (("annotate", trace, "--no-cache", "-o", a), ("hotspots", trace, "--no-cache", "--collapsed", a)):
        run_main(*command).assert_refused(a, "loop")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444 | 0o200, 0o755])
def test_an_existing_file_keeps_its_mode_and_owner(tmp_path, trace, writer, mode):
    target = tmp_path / "out.json"
    target.write_text("old")
    os.chown(target, 1234, 5678)
    target.chmod(mode)
    _writers(trace)[writer](target)
    info = target.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (mode, 1234, 5678)
    assert target.read_text() != "old"


def test_a_file_this_user_could_not_give_back_to_its_owner_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "theirs.json"
    target.write_text("old")
    real = os.stat

    def foreign(path, *args, **kwargs):  # the file belongs to uid 4321 and chown is not allowed
        info = real(path, *args, **kwargs)
        if str(path) == str(target):
            return os.stat_result((info.st_mode, info.st_ino, info.st_dev, info.st_nlink, 4321, info.st_gid,
                                   info.st_size, info.st_atime, info.st_mtime, info.st_ctime))
        return info

    monkeypatch.setattr(os, "stat", foreign)
    monkeypatch.setattr(os, "chown", lambda *a: (_ for _ in ()).throw(PermissionError(1, "Operation not permitted")))
    with pytest.raises(OutputError, match="belongs to another user"):
        write_text_atomic(target, "new", user_output=True)
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["theirs.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_and_dataset_folders_get_the_mode_of_the_umask(tmp_path, trace, umask):
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "new.txt", "x")
        run_main("export", trace, "--no-cache", "--workers", "1", "--parquet", tmp_path / "ds").assert_clean(codes=(0,))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "ds").stat().st_mode) == 0o777 & ~umask


def test_overwriting_a_link_to_a_dataset_replaces_the_dataset_and_keeps_the_link(tmp_path, trace):
    run_main("export", trace, "--no-cache", "--workers", "1", "--parquet", tmp_path / "ds1").assert_clean(codes=(0,))
    (tmp_path / "latest").symlink_to("ds1")
    (tmp_path / "ds1").chmod(0o750)
    run_main("export", trace, "--no-cache", "--workers", "1", "--parquet", tmp_path / "latest",
             "--overwrite").assert_clean(codes=(0,))
    assert (tmp_path / "latest").is_symlink() and os.readlink(tmp_path / "latest") == "ds1"
    assert (tmp_path / "ds1" / "_perfkit.json").is_file() and stat.S_IMODE((tmp_path / "ds1").stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds1", "latest", "t.json"]


@pytest.mark.parametrize("length", [240, 245, 252, 255])
@pytest.mark.parametrize("writer", ("atomic", "annotate"))
def test_the_longest_file_names_can_be_written(tmp_path, trace, writer, length):
    target = tmp_path / ("n" * (length - 5) + ".json")
    outcome = _writers(trace)[writer](target)
    assert outcome is None or outcome.rc == 0, outcome.why()
    assert target.is_file() and sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, "t.json"])


def test_a_name_too_long_for_the_file_system_is_one_line(tmp_path, trace):
    target = tmp_path / ("n" * 300 + ".json")
    run_main("annotate", trace, "--no-cache", "-o", target).assert_refused(target.name, "305 bytes long", "at most 255 bytes")


# -- every output against every input and log of the same command ---------------------------------------------

def test_an_output_that_is_an_input_by_any_name_is_refused(tmp_path, trace):
    (tmp_path / "alias.json").symlink_to(trace)
    os.link(trace, tmp_path / "hard.json")
    before = trace.read_bytes()
    for out in (trace, tmp_path / "alias.json", tmp_path / "hard.json", tmp_path / "." / "t.json"):
        run_main("annotate", trace, "--no-cache", "-o", out).assert_refused(out, "input trace", "choose another path")
        run_main("hotspots", trace, "--no-cache", "--collapsed", out).assert_refused(out, "input trace")
    run_main("export", trace, "--no-cache", "--parquet", tmp_path, "--overwrite").assert_refused(tmp_path, "holds")
    assert trace.read_bytes() == before


def test_refuse_clobber_sees_folders_holding_an_input(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "log.csv").write_text("x")
    with pytest.raises(ParameterError, match="holds the perf log"):
        refuse_clobber(tmp_path / "a", [("the perf log", tmp_path / "a" / "log.csv")])
    refuse_clobber(tmp_path / "b", [("the perf log", tmp_path / "a" / "log.csv"), ("nothing", "")])


def test_the_annotated_trace_of_a_notebook_never_replaces_its_perf_log(tmp_path, trace):
    from perfkit.export.annotate import write_annotated
    from perfkit.trace import load_trace

    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation="step_anatomy", metric="m", value=1.0)
    before = log.path.read_bytes()
    with pytest.raises(ParameterError, match="is the perf log"):
        write_annotated(load_trace(trace, use_cache=False), "trace", log.path, log.path)
    out = run_main("run", "step_anatomy", "-p", "annotated_path", log.path, "-p", "perf_log_path", log.path,
                   "--out", tmp_path / "reports", "--no-progress")
    out.assert_refused(log.path, "is the perf log")
    assert log.path.read_bytes() == before and not list((tmp_path / "reports").glob("*/*/*.ipynb"))


# -- the perf log: a row its reader takes back, ids that never collide -------------------------------------------

@pytest.mark.parametrize("field", ["change", "subject", "metric", "unit", "quality", "device"])
def test_a_row_too_long_for_the_reader_is_refused_and_nothing_is_written(tmp_path, field):
    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation="i", metric="m", value=1.0)
    before = log.path.read_bytes()
    fields = {"investigation": "i", "metric": "m", "value": 2.0, field: "x" * 1_100_000}
    with pytest.raises(ParameterError, match=f"shorten {field}"):
        log.append(**fields)
    assert log.path.read_bytes() == before and len(log.read()) == 1
    log.append(**{**fields, field: "x" * 1000})
    assert len(log.read()) == 2  # just under the limit reads back


def test_runs_started_in_the_same_second_get_their_own_ids(tmp_path, monkeypatch):
    import datetime as real
    from perfkit.report.perflog import log as log_module

    class OneSecond(real.datetime):  # both appends inside the same second, whatever the machine's clock does
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 12, 2, 12, 11, 42, tzinfo=tz)

    monkeypatch.setattr(log_module, "datetime", OneSecond)
    log = PerfLog(tmp_path / "perf_log.csv")
    first = log.append(investigation="cpu_bound", metric="step_ms", value=10.0, unit="ms")
    second = log.append(investigation="cpu_bound", metric="step_ms", value=20.0, unit="ms")
    assert first["run_id"] != second["run_id"] and first["run_id"][:17] == second["run_id"][:17]
    assert second["baseline_run"] == first["run_id"] and second["baseline"] == 10.0
    assert log.read(last_runs=1)["value"].tolist() == [20.0]


def test_a_corrupt_row_anywhere_fails_a_run_before_it_starts(tmp_path):
    log = PerfLog(tmp_path / "perf_log.csv")
    for k in range(5):
        log.append(investigation="i", metric=f"m{k}", value=1.0)
    lines = log.path.read_text().splitlines()
    lines[2] = lines[2].replace(",1.0,", ",one,")
    log.path.write_text("\n".join(lines) + "\n")
    out = run_main("run", "tiny_ok", "--out", tmp_path, "--notebook-dir", FIXTURES, "--no-progress")
    out.assert_refused(f"{log.path}:3", "corrupt row")
    assert not list(tmp_path.glob("*/*/tiny_ok.ipynb"))


# -- hidden .part files: removed once their writer is gone, never while it lives --------------------------------

_HOLD = ("import sys, time; from pathlib import Path; from perfkit.atomic import staged\n"
         "with staged(Path(sys.argv[1]), folder=sys.argv[2] == 'folder') as part:\n"
         "    print(part, flush=True); time.sleep(120)")


def _writer_process(target, kind):
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(target), kind], stdout=subprocess.PIPE, text=True)
    return child, Path(child.stdout.readline().strip())


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_killed_writers_part_is_removed_by_the_next_write_and_a_live_ones_is_kept(tmp_path, trace, kind):
    target = tmp_path / ("ds" if kind == "folder" else "out.json")
    dead, dead_part = _writer_process(target, kind)
    live, live_part = _writer_process(target, kind)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    try:
        assert dead_part.exists() and dead_part.name.startswith(f".{target.name}.")
        if kind == "folder":
            run_main("export", trace, "--no-cache", "--workers", "1", "--parquet", target).assert_clean(codes=(0,))
        else:
            write_text_atomic(target, "new")
        assert not dead_part.exists() and live_part.exists()
    finally:
        live.kill()
        live.wait()
    assert remove_abandoned(tmp_path) == [live_part] and not live_part.exists()


def test_a_part_is_locked_before_it_is_named_part(tmp_path):
    with staged(tmp_path / "x.json") as part:
        assert part.name.endswith(".part") and remove_abandoned(tmp_path) == [] and part.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing_half_written(tmp_path):
    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="nothing was half-written"):
        atomic_write(tmp_path / "out.json", fail)
    assert list(tmp_path.iterdir()) == []


# -- perfkit init: folders where files are, read-only folders, links ------------------------------------------

@pytest.mark.parametrize("in_the_way", ["", "notebooks", "reports"])
def test_init_refuses_a_file_where_the_workbook_needs_a_folder(tmp_path, in_the_way):
    root = tmp_path / "wb"
    if in_the_way:
        root.mkdir()
    (root / in_the_way if in_the_way else root).write_text("mine")
    out = run_main("init", root)
    out.assert_refused(root / in_the_way if in_the_way else root, "is a file, where the workbook needs a folder")
    assert (root / in_the_way if in_the_way else root).read_text() == "mine"


def test_init_into_a_read_only_folder_is_one_line(tmp_path):
    from fuzzkit import small_tmpfs

    with small_tmpfs(tmp_path / "ro", read_only=True) as ro:
        run_main("init", ro / "wb").assert_refused(ro / "wb", "Read-only file system")
        run_main("init", ro).assert_refused(ro, "Read-only file system")


@pytest.mark.parametrize("code", [13, 30, 28])  # EACCES, EROFS, ENOSPC, where mounting a tmpfs is not allowed
def test_init_that_cannot_make_or_write_is_one_line(tmp_path, monkeypatch, code):
    import perfkit.report.workbook_init as init

    def refuse(self, *args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(Path, "mkdir", refuse)
    run_main("init", tmp_path / "wb").assert_refused(tmp_path / "wb", os.strerror(code))
    monkeypatch.undo()
    monkeypatch.setattr(init, "write_text_atomic", lambda *a, **k: (_ for _ in ()).throw(
        OutputError(a[0], os.strerror(code))))
    run_main("init", tmp_path / "wb2").assert_refused(tmp_path / "wb2", os.strerror(code))


def test_init_keeps_a_link_to_nothing_and_follows_it_only_when_forced(tmp_path):
    root = tmp_path / "wb"
    root.mkdir()
    (root / "README.md").symlink_to(tmp_path / "elsewhere.md")
    run_main("init", root).assert_clean(codes=(0,))
    assert (root / "README.md").is_symlink() and not (tmp_path / "elsewhere.md").exists()
    run_main("init", root, "--force").assert_clean(codes=(0,))
    assert (root / "README.md").is_symlink() and (tmp_path / "elsewhere.md").read_text().startswith("# perfkit")
