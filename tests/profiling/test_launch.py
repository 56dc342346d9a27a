"""Every rank of a distributed job on the CPU: ``perfkit profile -- torchrun --nproc-per-node 2 train.py`` (and
``python -m torch.distributed.run``, and a script that calls ``torch.multiprocessing.spawn``), two ranks of the
gloo backend doing real all-reduces; each rank's trace in one folder, named for run, rank and steps, then
``perfkit ranks`` over them; the job's own exit status."""
from __future__ import annotations

import gzip
import json
import socket
import sys
from pathlib import Path

import pytest

from perfkit.cli import main
from perfkit.profiling.target import is_launcher, job_command

pytestmark = pytest.mark.slow

TRAIN = """
import os, sys, torch, torch.distributed as dist
def train(rank=None, world=None):
    if rank is None:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(6):
        loss = model(torch.randn(8, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
    dist.barrier()  # both ranks leave together: a rank tearing gloo down while its peer still ran once aborted
    dist.destroy_process_group()  # ("terminate called without an active exception"), and torchrun killed the peer
if __name__ == "__main__":
    if "--spawn" in sys.argv:
        import torch.multiprocessing as mp
        mp.spawn(train, args=(2,), nprocs=2)
    else:
        train()
    # under torchrun only the last rank fails: a rank that fails first gets the others killed (SIGTERM) before
    # their results are saved at exit, which made the test of --ranks 1 a race
    last = os.environ.get("RANK") in (None, "1")  # rank 1 of torchrun's 2, or no torchrun (mp.spawn's parent)
    sys.exit(next((int(a) for a in sys.argv[1:] if a.isdigit()), 0) if last else 0)
"""
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(tmp_path, capsys, port, *command, options=()) -> tuple[int, dict]:
    (tmp_path / "train.py").write_text(TRAIN.replace("{port}", str(port)))
    code = main(["profile", "--json", "--wait", "2", "--warmup", "1", "--active", "2", "--out", str(tmp_path / "t"),
                 *options, "--", *map(str, command)])
    out = capsys.readouterr().out
    return code, json.loads(out[out.rindex("\n{") + 1:] if "\n{" in out else out[out.index("{"):])


def _collectives(path) -> int:
    with gzip.open(path, "rt") as f:
        return sum(1 for e in json.load(f)["traceEvents"] if "all_reduce" in str(e.get("name", "")))


@pytest.mark.parametrize("launcher", [[TORCHRUN], [sys.executable, "-m", "torch.distributed.run"]])
def test_every_rank_of_a_torchrun_job_is_recorded_then_compared(tmp_path, capsys, monkeypatch, launcher):
    monkeypatch.chdir(tmp_path)
    code, r = _job(tmp_path, capsys, 0, *launcher, "--nproc-per-node", "2", "--master-port", _free_port(), "train.py")
    assert code == 0, r["warnings"]
    assert [rank["rank"] for rank in r["ranks"]] == [0, 1]
    folder = Path(r["folder"])
    for rank in r["ranks"]:
        trace = Path(rank["trace"])
        assert trace.parent == folder and trace.name == f"{folder.name}-rank{rank['rank']}-steps3-4.pt.trace.json.gz"
        assert rank["steps_recorded"] == 2 and rank["diagnosis"]["verdict"]
        assert _collectives(trace) > 0  # the gloo all-reduces are in each rank's trace
    assert [row["rank"] for row in r["cross_rank"]["ranks"]] == [0, 1]


def test_mp_spawn_children_are_the_ranks_and_the_scripts_exit_status_is_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, r = _job(tmp_path, capsys, _free_port(), "train.py", "--spawn", "3", options=["--ranks", "all"])
    assert code == 3 and r["exit_status"] == 3, r["warnings"]
    assert sorted(rank["rank"] for rank in r["ranks"]) == [0, 1] and r["cross_rank"] is not None


def test_torchruns_exit_status_is_perfkits_and_ranks_can_be_chosen(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, r = _job(tmp_path, capsys, 0, TORCHRUN, "--nproc-per-node", "2", "--master-port", _free_port(), "train.py", "3",
                   options=["--ranks", "1"])
    assert code == 1 and "status 1" in r["error"]  # torchrun's own status for a failed rank
    assert [rank["rank"] for rank in r["ranks"]] == [1] and r["cross_rank"] is None


def test_launchers_are_told_from_scripts():
    assert is_launcher("torchrun", ["--nproc-per-node", "2", "t.py"])
    assert is_launcher("/venv/bin/python3.11", ["-m", "torch.distributed.run", "t.py"])
    assert not is_launcher("python", ["t.py"]) and not is_launcher("train.py", [])
    assert job_command("train.py", ["1"], module=False, ranks=None) is None
    assert job_command("train.py", ["1"], module=False, ranks="all") == ([sys.executable, "train.py", "1"], True)
