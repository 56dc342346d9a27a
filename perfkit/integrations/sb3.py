"""``PerfkitCallback`` for Stable-Baselines3: ``model.learn(total_timesteps, callback=PerfkitCallback(active=3))``.

A step is one rollout and the update after it (``step="rollout"``, the default: the boundary is each rollout's
start, and the end of training), counted in iterations; ``step="env"`` makes each environment step a step,
counted in ``num_timesteps``. The verdict goes to the TensorBoard writer of the model's logger
(``tensorboard_log=``) and to the active W&B and MLflow runs (:mod:`perfkit.integrations.loggers`).
Other options: :class:`perfkit.integrations.window.ProfileWindow`'s.
"""
from __future__ import annotations

from stable_baselines3.common.callbacks import BaseCallback

from ..errors import ParameterError
from .window import ProfileWindow

UNITS = ("rollout", "env")


class PerfkitCallback(BaseCallback):
    """Profile iterations (or env steps) ``wait+warmup`` .. ``+active`` of ``learn()`` and log the verdict;
    ``window`` holds the result."""

    def __init__(self, step: str = "rollout", verbose: int = 0, **options):
        if step not in UNITS:
            raise ParameterError(f"step={step!r}: pass 'rollout' (one rollout + update) or 'env' (one env step)")
        super().__init__(verbose)
        self.unit, self.iterations = step, 0
        self.window = ProfileWindow("sb3", **options)

    def _on_training_start(self) -> None:
        self.window.guard(self._begin)

    def _on_rollout_start(self) -> None:
        if self.unit == "rollout" and self.n_calls > 0:  # the first rollout starts the first step
            self.iterations += 1
            self.window.step(self.iterations)

    def _on_step(self) -> bool:
        if self.unit == "env":
            self.window.guard(lambda: self.window.step(self.num_timesteps))
        return True

    def _on_training_end(self) -> None:
        if self.unit == "rollout":
            self.window.step(self.iterations + 1)
        self.window.end()

    def _begin(self) -> None:
        self.iterations = 0
        start = self.num_timesteps if self.unit == "env" else 0
        self.window.begin(start, rank=0, writers=_writers(self.model))


def _writers(model) -> list:
    formats = getattr(getattr(model, "logger", None), "output_formats", []) or []
    return [f.writer for f in formats if type(f).__name__ == "TensorBoardOutputFormat"]
