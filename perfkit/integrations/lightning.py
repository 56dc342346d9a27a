"""``PerfkitCallback`` for Lightning: ``Trainer(callbacks=[PerfkitCallback(active=3)])``.

A step is one advance of ``trainer.global_step`` (one optimizer step: gradient accumulation's micro-batches make
one step), seen after each training batch; the rank is ``trainer.global_rank``. The verdict goes to the
trainer's ``TensorBoardLogger`` (its ``SummaryWriter``), ``MLFlowLogger`` (its run) and W&B run
(:mod:`perfkit.integrations.loggers`). Options: :class:`perfkit.integrations.window.ProfileWindow`'s.
"""
from __future__ import annotations

try:  # the unified package first, then the standalone one: the same Callback under two names
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover (the tests install lightning)
    from pytorch_lightning.callbacks import Callback

from .window import ProfileWindow


class PerfkitCallback(Callback):
    """Profile global steps ``wait+warmup`` .. ``+active`` of ``trainer.fit`` and log the verdict; ``window``
    holds the result (``window.result``, ``window.record``, ``window.logged``)."""

    def __init__(self, **options):
        super().__init__()
        self.window = ProfileWindow("lightning", **options)

    def on_train_start(self, trainer, pl_module) -> None:
        self.window.guard(self._begin, trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.window.guard(lambda: self.window.step(trainer.global_step))

    def on_train_end(self, trainer, pl_module) -> None:
        self.window.end()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.window.end()

    def _begin(self, trainer) -> None:
        writers, runs = _sinks(trainer)
        self.window.begin(trainer.global_step, rank=trainer.global_rank, writers=writers, mlflow_runs=runs)


def _sinks(trainer) -> tuple[list, list]:
    """(TensorBoard writers, (MlflowClient, run id) pairs) of the trainer's loggers."""
    writers, runs = [], []
    for logger in getattr(trainer, "loggers", []):
        kind = type(logger).__name__
        if kind == "TensorBoardLogger":
            writers.append(logger.experiment)
        elif kind == "MLFlowLogger":
            runs.append((logger.experiment, logger.run_id))
    return writers, runs
