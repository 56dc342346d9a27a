"""A leaky trainer: tiny MLP regression with switchable, realistic memory leaks.

Each switch reproduces a leak seen in real training loops; ``variants()`` names each one
alone and the fixed ("clean") loop. Sizes are chosen so ``perfkit.bench.leak.hunt_leak``
sees every leak within ~300 CPU steps (a few seconds) while the whole leak stays a few MB:

* ``keep_graph_losses``: ``losses.append(loss)``, the loss *tensor* with its
  ``grad_fn`` chain, every step (the PyTorch FAQ's "accumulating history" mistake). After
  ``backward()`` the saved activations are freed, so each step keeps one tensor object and
  its autograd nodes (~2 KB of C++ memory on CPU, one 512 B allocator block on CUDA); it shows
  as +1 ``torch.Tensor`` object per step. Fix: ``losses.append(loss.item())``.
* ``unbounded_history``: appends numpy copies of the step's inputs and hidden features
  (``batch_size * (in_features + hidden) * 4`` bytes, 20 KiB with the defaults) to a list
  that is never trimmed. numpy buffers are visible to ``tracemalloc``.
  Fix: ``collections.deque(maxlen=...)`` or keep running statistics.
* ``accumulating_callback``: an ``OutputRecorder`` callback keeps ``.detach().clone()``
  copies of the predictions and hidden features (16 KiB per step) "for an epoch-end metric"
  and is never reset. Fix: reduce to a statistic in the callback, or clear it each epoch.

"clean" stores ``loss.item()`` floats in a ``deque(maxlen=loss_window)``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..errors import ParameterError
from .base import Workload, build_config, check_bool, check_int, seeded_init

NAME = "leaky"
LEAK_SWITCHES = ("keep_graph_losses", "unbounded_history", "accumulating_callback")


@dataclass(frozen=True)
class Config:
    """Sizes and leak switches. ``batch_size`` rows of ``in_features`` inputs, one hidden
    layer of ``hidden`` units, one regression output; ``lr`` is the SGD learning rate;
    ``loss_window`` is how many recent loss floats the (clean) loop keeps."""

    batch_size: int = 64
    in_features: int = 16
    hidden: int = 64
    lr: float = 1e-2
    loss_window: int = 20
    keep_graph_losses: bool = False
    unbounded_history: bool = False
    accumulating_callback: bool = False
    seed: int = 0

    def __post_init__(self):
        for name in ("batch_size", "in_features", "hidden", "loss_window"):
            check_int(name, getattr(self, name))
        check_int("seed", self.seed, 0)
        for name in LEAK_SWITCHES:
            check_bool(name, getattr(self, name))
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ParameterError(f"lr={self.lr!r}: must be a number > 0")

    @property
    def leaks(self) -> tuple[str, ...]:
        """Names of the leak switches that are on."""
        return tuple(n for n in LEAK_SWITCHES if getattr(self, n))


def variants() -> dict[str, Config]:
    """Each leak alone, plus "clean" (the fix: loss floats in a bounded deque)."""
    out = {name: Config(**{name: True}) for name in LEAK_SWITCHES}
    out["clean"] = Config()
    return out


class OutputRecorder:
    """A metrics callback that keeps a copy of every step's outputs and is never reset:
    the leak behind ``accumulating_callback``."""

    def __init__(self):
        self.records: list[dict] = []

    def on_step(self, outputs: dict) -> None:
        self.records.append({k: v.detach().clone() for k, v in outputs.items()})


class LeakyTrainer(Workload):
    """Tiny MLP regression trainer (Linear-ReLU-Linear, MSE, SGD) on synthetic data
    ``y = x @ w + noise``. ``step()`` returns ``{"loss": float}``; ``retained`` counts the
    per-step records the leaks hold."""

    name = NAME

    def __init__(self, config: Config, device: str = "auto"):
        import torch

        super().__init__(config, device)
        c = config
        self._gen = torch.Generator(device="cpu").manual_seed(c.seed)
        self._model = seeded_init(c.seed, lambda: torch.nn.Sequential(
            torch.nn.Linear(c.in_features, c.hidden), torch.nn.ReLU(), torch.nn.Linear(c.hidden, 1))).to(self.device)
        self._optim = torch.optim.SGD(self._model.parameters(), lr=c.lr)
        self._true_w = torch.randn(c.in_features, 1, generator=self._gen).to(self.device)
        self._recent_losses: deque[float] = deque(maxlen=c.loss_window)
        self._losses: list = []
        self._history: list[dict] = []
        self._callback = OutputRecorder()

    def _batch(self):
        import torch

        c = self.config
        x = torch.randn(c.batch_size, c.in_features, generator=self._gen).to(self.device)
        noise = 0.1 * torch.randn(c.batch_size, 1, generator=self._gen).to(self.device)
        return x, x @ self._true_w + noise

    def _step(self) -> dict:
        """One SGD step; the enabled leaks keep their per-step data."""
        import torch

        x, y = self._batch()
        features = self._model[1](self._model[0](x))
        pred = self._model[2](features)
        loss = torch.nn.functional.mse_loss(pred, y)
        self._optim.zero_grad(set_to_none=True)
        loss.backward()
        self._optim.step()
        self._record(loss, x, features, pred)
        return {"loss": self._recent_losses[-1]}

    def _record(self, loss, x, features, pred) -> None:
        c = self.config
        self._recent_losses.append(loss.item())
        if c.keep_graph_losses:
            self._losses.append(loss)
        if c.unbounded_history:
            self._history.append({
                "inputs": x.detach().cpu().numpy().copy(),
                "features": features.detach().cpu().numpy().copy(),
            })
        if c.accumulating_callback:
            self._callback.on_step({"pred": pred, "features": features})

    @property
    def retained(self) -> int:
        """Per-step records the leaks hold (0 for the clean loop and after ``close()``)."""
        if self._closed:
            return 0
        return len(self._losses) + len(self._history) + len(self._callback.records)


def make(config: Config | None = None, device: str = "auto", **overrides) -> LeakyTrainer:
    """Build the leaky trainer; ``overrides`` replace Config fields (ParameterError if unknown)."""
    return LeakyTrainer(build_config(Config, config, overrides), device)
