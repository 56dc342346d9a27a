"""``PerfkitCallback`` for the Hugging Face ``Trainer``: ``Trainer(..., callbacks=[PerfkitCallback(active=3)])``.

A step is one ``state.global_step`` (``on_step_end``: one optimizer step, after gradient accumulation); the rank
is ``args.process_index``. The verdict goes to TensorBoard when ``report_to`` has it (a ``SummaryWriter`` of its
own in ``$TENSORBOARD_LOGGING_DIR`` or ``<output_dir>/runs``, run ``perfkit``: the Trainer's own writer is not
handed to callbacks), and to the W&B and MLflow runs the Trainer's integrations started
(:mod:`perfkit.integrations.loggers`). Options: :class:`perfkit.integrations.window.ProfileWindow`'s.
"""
from __future__ import annotations

import os

from transformers import TrainerCallback

from .window import ProfileWindow


class PerfkitCallback(TrainerCallback):
    """Profile global steps ``wait+warmup`` .. ``+active`` of ``trainer.train()`` and log the verdict; ``window``
    holds the result."""

    def __init__(self, **options):
        self.window = ProfileWindow("transformers", **options)

    def on_train_begin(self, args, state, control, **kwargs):
        self.window.guard(self._begin, args, state)

    def on_step_end(self, args, state, control, **kwargs):
        self.window.guard(lambda: self.window.step(state.global_step))

    def on_train_end(self, args, state, control, **kwargs):
        self.window.end()

    def _begin(self, args, state) -> None:
        writers = _writers(args) if "tensorboard" in (args.report_to or []) else ()
        self.window.begin(state.global_step, rank=args.process_index, run=getattr(args, "run_name", None),
                          writers=writers)


class _LazyWriter:
    """A TensorBoard ``SummaryWriter`` created at its first use: only a window that ends writes an event file."""

    def __init__(self, log_dir: str):
        self.log_dir, self._writer = log_dir, None

    def __getattr__(self, name):
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter  # heavy, optional: tensorboard

            self._writer = SummaryWriter(log_dir=self.log_dir)
        return getattr(self._writer, name)


def _writers(args) -> list:
    base = os.getenv("TENSORBOARD_LOGGING_DIR") or os.path.join(args.output_dir or ".", "runs")
    return [_LazyWriter(os.path.join(os.path.expanduser(base), "perfkit"))]
