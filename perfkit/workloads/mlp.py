"""A small policy-style MLP regression problem for the A/B harnesses (compile and AMP A/B, their
notebooks and ``perfkit validate``): the model, seeded batches, the loss and example inputs."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError


@dataclass(frozen=True)
class MLPProblem:
    """A small policy-style MLP regression (``features`` -> ``hidden`` x ``layers`` ->
    ``outputs``) for the A/B harnesses: ``make_model()``, ``make_batch(step)`` (seeded by
    step), ``loss_fn`` (MSE) and ``example_inputs`` for ``compile_ab``."""

    batch: int = 64
    features: int = 32
    hidden: int = 128
    layers: int = 2
    outputs: int = 4
    seed: int = 0

    def make_model(self):
        import torch

        torch.manual_seed(self.seed)
        dims = [self.features] + [self.hidden] * self.layers
        blocks = [m for a, b in zip(dims, dims[1:]) for m in (torch.nn.Linear(a, b), torch.nn.Tanh())]
        return torch.nn.Sequential(*blocks, torch.nn.Linear(dims[-1], self.outputs))

    def make_batch(self, step: int) -> tuple:
        import torch

        g = torch.Generator().manual_seed(self.seed * 100_003 + step)
        inputs = torch.randn(self.batch, self.features, generator=g)
        return (inputs,), torch.randn(self.batch, self.outputs, generator=g)

    @property
    def loss_fn(self):
        import torch

        return torch.nn.functional.mse_loss

    @property
    def example_inputs(self) -> tuple:
        return self.make_batch(0)[0]


def mlp_problem(batch: int = 64, features: int = 32, hidden: int = 128, layers: int = 2, outputs: int = 4,
                seed: int = 0) -> MLPProblem:
    """An ``MLPProblem``; raises ParameterError for non-positive sizes."""
    sizes = dict(batch=batch, features=features, hidden=hidden, layers=layers, outputs=outputs)
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ParameterError(f"mlp_problem: sizes must be integers >= 1, got {bad}")
    return MLPProblem(seed=int(seed), **sizes)
