"""The Hugging Face Trainer callback on a GPT-2 built from a tiny config in code (no download: HF_HUB_OFFLINE=1)
on the CPU: the window by ``state.global_step`` and the verdict in a TensorBoard event file beside the Trainer's."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from perfkit.integrations.transformers import PerfkitCallback  # noqa: E402
from windowcheck import check_window, tensorboard_tags  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=32, length=16, vocab=64):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_trainer_records_global_steps_and_logs_the_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16,
                                      bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=4,
                                          report_to=["tensorboard"], logging_steps=100, save_strategy="no",
                                          use_cpu=True, disable_tqdm=True, run_name="gpt")
    callback = PerfkitCallback(wait=2, warmup=1, active=2, out=tmp_path / "traces")
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback]).train()
    check_window(callback.window, run="gpt", rank=0, steps=(3, 4))
    assert callback.window.logged == ["tensorboard"]
    tags = tensorboard_tags(tmp_path / "out" / "runs" / "perfkit")
    assert "perfkit/verdict/text_summary" in tags["text"] and "perfkit/step_ms" in tags["scalars"]
