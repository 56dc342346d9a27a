"""The Lightning callback on a real (tiny) LightningModule on the CPU: the window by global step, the verdict in
the TensorBoardLogger's event file, gradient accumulation, and the user's losses and checkpoint unchanged."""
from __future__ import annotations

import pytest
import torch

L = pytest.importorskip("lightning.pytorch")

from lightning.pytorch.loggers import TensorBoardLogger  # noqa: E402

from perfkit.integrations.lightning import PerfkitCallback  # noqa: E402
from perfkit.trace import load_trace  # noqa: E402
from windowcheck import check_window, tensorboard_tags, tensorboard_text  # noqa: E402


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path, callbacks, *, steps=8, accumulate=1, logger=False):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    model = Tiny()
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=logger, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks,
                        accumulate_grad_batches=accumulate, default_root_dir=str(tmp_path))
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    return model, trainer


def test_lightning_records_global_steps_and_logs_the_verdict_to_tensorboard(tmp_path):
    callback = PerfkitCallback(wait=2, warmup=1, active=2, out=tmp_path / "traces", run="lit")
    logger = TensorBoardLogger(str(tmp_path / "tb"), name="exp")
    _fit(tmp_path, [callback], logger=logger)
    trace = check_window(callback.window, run="lit", rank=0, steps=(3, 4))
    assert len(load_trace(trace).steps) == 2
    assert callback.window.logged == ["tensorboard"]
    tags = tensorboard_tags(tmp_path / "tb")
    assert "perfkit/verdict/text_summary" in tags["text"] and "perfkit/step_ms" in tags["scalars"]
    text = tensorboard_text(tmp_path / "tb")
    assert callback.window.record["title"] in text and trace.name in text


def test_gradient_accumulation_counts_optimizer_steps(tmp_path):
    callback = PerfkitCallback(wait=1, warmup=1, active=2, out=tmp_path / "traces", run="acc")
    _fit(tmp_path, [callback], steps=6, accumulate=2)  # 12 batches, 6 global steps
    check_window(callback.window, run="acc", rank=0, steps=(2, 3))
    assert callback.window.logged == []  # no logger attached: nothing logged


def test_losses_and_checkpoint_are_the_same_with_and_without_the_callback(tmp_path):
    plain, plain_trainer = _fit(tmp_path / "a", [])
    callback = PerfkitCallback(wait=2, warmup=1, active=2, out=tmp_path / "traces", run="same")
    watched, watched_trainer = _fit(tmp_path / "b", [callback])
    assert callback.window.result.trace is not None  # the window was recorded in this run
    assert watched.losses == plain.losses and len(plain.losses) == 8
    plain_trainer.save_checkpoint(tmp_path / "a.ckpt")
    watched_trainer.save_checkpoint(tmp_path / "b.ckpt")
    a, b = (torch.load(tmp_path / f"{n}.ckpt", weights_only=False)["state_dict"] for n in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
