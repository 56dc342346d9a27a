"""MPPI planning over an MLP world model (TD-MPC2 style).

Each ``step()`` takes the current numpy observation of a small synthetic environment,
encodes it, samples ``samples`` action sequences of length ``horizon``, rolls them out
through the learned dynamics and reward MLPs, reweights them (top-``elites``, softmax with
``temperature``) for ``iterations`` rounds, then applies the first action of the mean plan
to the environment (``action.cpu().numpy()``: the one device-to-host copy a planner needs).

Pathology switches (see :func:`variants`):

* ``tensor_ctor="float_tensor"`` builds the observation batch with ``torch.FloatTensor(obs)
  .to(device)`` once per sample in a Python loop (a naive port from numpy code); the fix
  ``"from_numpy"`` wraps the array without a copy, moves it once with ``non_blocking=True``
  and broadcasts the encoded latent.
* ``grad_mode="no_grad"`` vs ``"inference_mode"`` (less autograd bookkeeping per op).
* ``preallocate=True`` reuses the noise, action and return buffers (``out=`` and in-place ops).
* ``compile=True`` compiles the rollout with ``torch.compile(backend=compile_backend)``; the
  compiled rollout is functional, so ``preallocate`` then only affects sampling buffers.

``step()`` returns ``{}`` unless ``log_every_step=True``, in which case it returns
``{"value": float, "action_std": float}`` (two ``.item()`` reads, i.e. two syncs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Workload, build_config, check_bool, check_choice, check_int, seeded_init

TENSOR_CTORS = ("float_tensor", "from_numpy")
GRAD_MODES = ("no_grad", "inference_mode")
DISCOUNT = 0.99


@dataclass(frozen=True)
class Config:
    """Sizes and switches of the MPPI planner; defaults are tiny and pathology-free."""

    obs_dim: int = 16
    action_dim: int = 4
    latent_dim: int = 32
    hidden: int = 64
    samples: int = 64
    horizon: int = 5
    iterations: int = 3
    elites: int = 8
    temperature: float = 0.5
    min_std: float = 0.05
    max_std: float = 2.0
    tensor_ctor: str = "from_numpy"
    grad_mode: str = "inference_mode"
    preallocate: bool = True
    compile: bool = False
    compile_backend: str = "inductor"
    log_every_step: bool = False
    seed: int = 0

    def __post_init__(self):
        for name in ("obs_dim", "action_dim", "latent_dim", "hidden", "samples", "horizon", "iterations"):
            check_int(name, getattr(self, name))
        check_int("elites", self.elites, 1, self.samples)
        check_int("seed", self.seed, 0)
        check_choice("tensor_ctor", self.tensor_ctor, TENSOR_CTORS)
        check_choice("grad_mode", self.grad_mode, GRAD_MODES)
        for name in ("preallocate", "compile", "log_every_step"):
            check_bool(name, getattr(self, name))


def variants() -> dict:
    """The pathology (naive numpy port) and its fix."""
    return {
        "float_tensor": Config(tensor_ctor="float_tensor", grad_mode="no_grad", preallocate=False),
        "from_numpy": Config(tensor_ctor="from_numpy", grad_mode="inference_mode", preallocate=True),
    }


def make(config: Config | None = None, device: str = "auto", **overrides) -> "MPPIWorkload":
    """Build the planner; ``overrides`` replace Config fields (ParameterError if unknown)."""
    return MPPIWorkload(build_config(Config, config, overrides), device)


class _LinearEnv:
    """obs' = tanh(A obs + B action) + noise, in float32 numpy (the host-side environment)."""

    def __init__(self, obs_dim: int, action_dim: int, seed: int):
        self._rng = np.random.default_rng(seed)
        q, _ = np.linalg.qr(self._rng.standard_normal((obs_dim, obs_dim)))
        self._a = (0.9 * q).astype(np.float32)
        self._b = self._rng.standard_normal((obs_dim, action_dim)).astype(np.float32) * 0.3
        self.obs = self._rng.standard_normal(obs_dim).astype(np.float32)

    def step(self, action: np.ndarray) -> np.ndarray:
        noise = self._rng.standard_normal(self.obs.shape).astype(np.float32) * 0.01
        self.obs = (np.tanh(self._a @ self.obs + self._b @ action) + noise).astype(np.float32)
        return self.obs


def _world_model(cfg: Config):
    import torch.nn as nn

    def mlp(n_in: int, n_out: int):
        return nn.Sequential(
            nn.Linear(n_in, cfg.hidden), nn.LayerNorm(cfg.hidden), nn.Mish(), nn.Linear(cfg.hidden, n_out)
        )

    za = cfg.latent_dim + cfg.action_dim
    return nn.ModuleDict({
        "encoder": mlp(cfg.obs_dim, cfg.latent_dim),
        "dynamics": mlp(za, cfg.latent_dim),
        "reward": mlp(za, 1),
        "value": mlp(cfg.latent_dim, 1),
    })


class MPPIWorkload(Workload):
    name = "mppi"

    def __init__(self, config: Config, device: str = "auto"):
        import torch

        super().__init__(config, device)
        cfg = config
        self._model = seeded_init(cfg.seed, lambda: _world_model(cfg)).to(self.device).eval()
        self._env = _LinearEnv(cfg.obs_dim, cfg.action_dim, cfg.seed)
        self._gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self._mean = torch.zeros(cfg.horizon, cfg.action_dim, device=self.device)
        self._buffers = self._allocate() if cfg.preallocate else None
        self._rollout_fn = self._rollout
        if cfg.compile:
            self._rollout_fn = torch.compile(self._rollout, backend=cfg.compile_backend)
        self.last_action: np.ndarray | None = None

    def _allocate(self) -> dict:
        import torch

        cfg, dev = self.config, self.device
        n = cfg.samples
        return {
            "noise": torch.empty(n, cfg.horizon, cfg.action_dim, device=dev),
            "actions": torch.empty(n, cfg.horizon, cfg.action_dim, device=dev),
            "value": torch.empty(n, 1, device=dev),
            "za": torch.empty(n, cfg.latent_dim + cfg.action_dim, device=dev),
        }

    def compile_inputs(self, scales=(2, 4)) -> dict:
        """``model``, ``example_inputs`` and ``shape_variants`` for ``perfkit.compile_ab``: the
        dynamics MLP on a (samples, latent + action) batch, and batches of ``scales`` times as many
        samples, as a planner whose sample count changes between calls feeds it (the first new
        count recompiles; dynamo then marks the dimension dynamic)."""
        import torch

        cfg = self.config
        gen = torch.Generator().manual_seed(cfg.seed)

        def batch(n: int):
            return torch.randn(n, cfg.latent_dim + cfg.action_dim, generator=gen)

        return {"model": self._model["dynamics"], "example_inputs": (batch(cfg.samples),),
                "shape_variants": [(batch(cfg.samples * k),) for k in scales]}

    def _grad_context(self):
        import torch

        return torch.inference_mode() if self.config.grad_mode == "inference_mode" else torch.no_grad()

    def _step(self) -> dict:
        with self._grad_context():
            z = self._encode(self._env.obs)
            mean, std, value = self._plan(z)
            action = mean[0]
            self._mean = self._shift(mean)
            metrics = {}
            if self.config.log_every_step:
                metrics = {"value": value.mean().item(), "action_std": std.mean().item()}
            self.last_action = action.cpu().numpy()
        self._env.step(self.last_action)
        return metrics

    def _encode(self, obs: np.ndarray):
        import torch

        n, dev = self.config.samples, self.device
        if self.config.tensor_ctor == "float_tensor":
            # The naive port: one legacy-constructor copy and one .to() per sample.
            batch = torch.stack([torch.FloatTensor(obs).to(dev) for _ in range(n)])
            return self._model["encoder"](batch)
        obs_t = torch.from_numpy(obs).to(dev, non_blocking=True)
        return self._model["encoder"](obs_t.unsqueeze(0)).expand(n, -1)

    def _plan(self, z):
        import torch

        cfg = self.config
        mean = self._mean
        std = torch.full_like(mean, cfg.max_std)
        for _ in range(cfg.iterations):
            actions = self._sample(mean, std)
            value = self._rollout_fn(z, actions)
            mean, std, elite_value = self._reweight(actions, value)
        return mean, std, elite_value

    def _sample(self, mean, std):
        import torch

        cfg, buf = self.config, self._buffers
        shape = (cfg.samples, cfg.horizon, cfg.action_dim)
        if buf is None:
            noise = torch.randn(shape, generator=self._gen, device=self.device)
            return (mean + std * noise).clamp(-1.0, 1.0)
        torch.randn(shape, generator=self._gen, device=self.device, out=buf["noise"])
        torch.addcmul(mean, std, buf["noise"], out=buf["actions"])
        return buf["actions"].clamp_(-1.0, 1.0)

    def _rollout(self, z, actions):
        """Discounted model return of each sampled sequence, shape (samples, 1)."""
        if self._buffers is not None and not self.config.compile:
            return self._rollout_inplace(z, actions)
        import torch

        value = torch.zeros(actions.shape[0], 1, device=actions.device)
        for t in range(actions.shape[1]):
            za = torch.cat([z, actions[:, t]], dim=-1)
            value = value + DISCOUNT**t * self._model["reward"](za)
            z = self._model["dynamics"](za)
        return value + DISCOUNT ** actions.shape[1] * self._model["value"](z)

    def _rollout_inplace(self, z, actions):
        import torch

        buf = self._buffers
        value = buf["value"].zero_()
        for t in range(actions.shape[1]):
            za = torch.cat([z, actions[:, t]], dim=-1, out=buf["za"])
            value.add_(self._model["reward"](za), alpha=DISCOUNT**t)
            z = self._model["dynamics"](za)
        return value.add_(self._model["value"](z), alpha=DISCOUNT ** actions.shape[1])

    def _reweight(self, actions, value):
        import torch

        cfg = self.config
        elite_value, idx = value.squeeze(1).topk(cfg.elites)
        elites = actions[idx]
        weight = torch.softmax(cfg.temperature * (elite_value - elite_value.max()), dim=0)
        weight = weight.view(-1, 1, 1)
        mean = (weight * elites).sum(0)
        std = (weight * (elites - mean) ** 2).sum(0).sqrt().clamp(cfg.min_std, cfg.max_std)
        return mean, std, elite_value

    def _shift(self, mean):
        import torch

        return torch.cat([mean[1:], torch.zeros_like(mean[:1])])
