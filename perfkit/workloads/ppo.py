"""PPO on a vectorized gridworld that lives in tensors.

``envs`` gridworlds of ``grid`` x ``grid`` cells step together with torch ops on the device
(no Python per environment): an agent moves up/down/left/right towards a goal, gets +1 on
reaching it and -0.01 per move, and is reset at the goal or after ``4 * grid`` moves. The
observation is two one-hot planes (agent, goal); a small CNN outputs action logits and a value.
Each ``step()`` is one PPO iteration: a ``rollout``-step rollout, GAE, then ``epochs`` passes
of clipped-objective updates over shuffled minibatches of ``minibatch`` transitions.

Pathology switches (see :func:`variants`):

* ``log_every_step_item=True``: ``.item()`` on the reward of every environment step and the
  loss of every update (each one a host-device sync); the fix accumulates on the device and
  reads once every ``metrics_every`` iterations.
* ``nan_checks=k`` (0..6): ``if torch.isnan(x).any(): raise`` at the first k of six points of
  the forward pass and loss; each is a sync, and each breaks a ``torch.compile`` graph.
* ``hot_branch=True``: ``if (h.abs() > 6).any(): h = h.clamp(-6, 6)`` in the forward pass, a
  data-dependent Python branch (sync + graph break); the fix clamps unconditionally (same math).
* ``stats_flag=True``: ``forward(obs, record_stats)`` keeps the hidden layer's largest magnitude
  when the Python flag ``record_stats`` is True, which it is on the last rollout step of each
  iteration only: a flag that flips between calls. Eagerly it costs nothing; under
  ``torch.compile`` Dynamo guards on its value, so the first flip recompiles. The statistic is
  reported as ``hidden_absmax`` with the metrics.
* ``nonzero_reset=True``: finished environments are reset through ``torch.where(done)[0]``
  (one-argument ``where`` is a nonzero: a sync per environment step) instead of the
  three-argument ``torch.where(done, new, old)``; same random draws, same results.
* ``amp=True``: bf16 autocast (CPU or CUDA); ``fused_adam=True``; ``compile=True``.

``compile_inputs()`` returns the policy and the calls its forward sees (``perfkit.compile_ab``'s
``model``, ``example_inputs`` and ``shape_variants``), so the graph break and the recompile each
show with dynamo's reason and the source line.

``step()`` returns ``{"reward": float, "loss": float, "entropy": float}`` (means since the last
report) on every step with ``log_every_step_item=True``; otherwise on every
``metrics_every``-th step, and ``{}`` on the others.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PerfkitError
from .base import Workload, build_config, check_bool, check_int, seeded_init

NAN_CHECK_SITES = ("conv1", "conv2", "hidden", "logits", "value", "loss")
METRICS = ("reward", "loss", "entropy")


@dataclass(frozen=True)
class Config:
    """Sizes and switches of the PPO workload; defaults are tiny and pathology-free."""

    envs: int = 16
    grid: int = 7
    rollout: int = 16
    epochs: int = 2
    minibatch: int = 64
    channels: int = 16
    hidden: int = 64
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    log_every_step_item: bool = False
    metrics_every: int = 4
    amp: bool = False
    fused_adam: bool = False
    nan_checks: int = 0
    hot_branch: bool = False
    stats_flag: bool = False
    nonzero_reset: bool = False
    compile: bool = False
    compile_backend: str = "inductor"
    seed: int = 0

    def __post_init__(self):
        for name in ("envs", "rollout", "epochs", "channels", "hidden", "metrics_every"):
            check_int(name, getattr(self, name))
        check_int("grid", self.grid, 2)
        check_int("minibatch", self.minibatch, 1, self.envs * self.rollout)
        check_int("nan_checks", self.nan_checks, 0, len(NAN_CHECK_SITES))
        check_int("seed", self.seed, 0)
        for name in ("log_every_step_item", "amp", "fused_adam", "hot_branch", "stats_flag", "nonzero_reset",
                     "compile"):
            check_bool(name, getattr(self, name))


def variants() -> dict:
    """Two sync pathologies and the sync-free fix of both, all with fused Adam so that only
    the planted syncs differ (unfused Adam calls ``.item()`` on its step counters).

    ``item_logging``: ``.item()`` per env step and per update. ``sync_checks``: four planted
    NaN checks and the data-dependent hot branch. ``batched_metrics``: neither.

    Under ``torch.compile`` (backend "eager": dynamo's graph breaks and recompiles without code
    generation; override ``compile_backend`` to time real compiled code), with a shorter rollout
    (8 steps, 1 epoch) so their traces stay small: ``tensor_branch`` (the hot branch, a graph
    break), ``flag_flip`` (``stats_flag``, a recompile) and ``compiled``, the fix of both.
    """
    base = Config(fused_adam=True)
    compiled = replace(base, compile=True, compile_backend="eager", rollout=8, epochs=1)
    return {
        "item_logging": replace(base, log_every_step_item=True),
        "sync_checks": replace(base, nan_checks=4, hot_branch=True),
        "batched_metrics": replace(base, log_every_step_item=False, nan_checks=0, hot_branch=False),
        "tensor_branch": replace(compiled, hot_branch=True),
        "flag_flip": replace(compiled, stats_flag=True),
        "compiled": compiled,
    }


def make(config: Config | None = None, device: str = "auto", **overrides) -> "PPOWorkload":
    """Build the PPO workload; ``overrides`` replace Config fields (ParameterError if unknown)."""
    return PPOWorkload(build_config(Config, config, overrides), device)


def _check_nan(x, site: str) -> None:
    import torch

    if torch.isnan(x).any():
        raise PerfkitError(f"ppo: NaN at {site} (planted nan_checks); lower lr or disable amp")


def _policy(cfg: Config):
    import torch.nn as nn

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(2, cfg.channels, 3, padding=1)
            self.conv2 = nn.Conv2d(cfg.channels, cfg.channels, 3, padding=1)
            self.fc = nn.Linear(cfg.channels * cfg.grid * cfg.grid, cfg.hidden)
            self.logits = nn.Linear(cfg.hidden, 4)
            self.value = nn.Linear(cfg.hidden, 1)
            self.hidden_absmax = None  # set by forward(..., record_stats=True)

        def forward(self, obs, record_stats: bool = False):
            checks = NAN_CHECK_SITES[: cfg.nan_checks]
            h = self.conv1(obs).relu()
            if "conv1" in checks:
                _check_nan(h, "conv1")
            h = self.conv2(h).relu()
            if "conv2" in checks:
                _check_nan(h, "conv2")
            h = self.fc(h.flatten(1)).relu()
            if cfg.hot_branch:
                if (h.abs() > 6).any():  # data-dependent branch: a sync and a graph break
                    h = h.clamp(-6.0, 6.0)
            else:
                h = h.clamp(-6.0, 6.0)
            if record_stats:  # a Python flag: torch.compile guards on its value
                self.hidden_absmax = h.detach().abs().amax()
            if "hidden" in checks:
                _check_nan(h, "hidden")
            logits, value = self.logits(h).float(), self.value(h).float().squeeze(-1)
            if "logits" in checks:
                _check_nan(logits, "logits")
            if "value" in checks:
                _check_nan(value, "value")
            return logits, value

    return Policy()


class _GridEnvs:
    """``n`` gridworlds stepped with tensor ops on ``device``; all state stays there."""

    MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

    def __init__(self, n: int, grid: int, device: str, gen, nonzero_reset: bool = False):
        import torch

        self.n, self.grid, self.device, self._gen = n, grid, device, gen
        self.nonzero_reset = nonzero_reset
        self._moves = torch.tensor(self.MOVES, device=device)
        self.pos, self.goal = self._random_cells(), self._random_cells()
        self.t = torch.zeros(n, dtype=torch.long, device=device)
        self.obs = torch.zeros(n, 2, grid, grid, device=device)
        self._render()

    def _random_cells(self):
        import torch

        return torch.randint(0, self.grid, (self.n, 2), generator=self._gen, device=self.device)

    def _render(self):
        flat = self.obs.zero_().view(self.n, 2, -1)
        for channel, cell in enumerate((self.pos, self.goal)):
            index = (cell[:, 0] * self.grid + cell[:, 1]).view(-1, 1)
            flat[:, channel].scatter_(1, index, 1.0)

    def step(self, action):
        """Move by ``action`` (n,) long; returns (reward, done) float tensors of shape (n,)."""
        import torch

        self.pos = (self.pos + self._moves[action]).clamp(0, self.grid - 1)
        self.t += 1
        reached = (self.pos == self.goal).all(1)
        done = reached | (self.t >= 4 * self.grid)
        reward = reached.float() - 0.01
        if self.nonzero_reset:
            self._reset_indexed(done)
        else:
            self.pos = torch.where(done[:, None], self._random_cells(), self.pos)
            self.goal = torch.where(done[:, None], self._random_cells(), self.goal)
            self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        self._render()
        return reward, done.float()

    def _reset_indexed(self, done) -> None:
        """The same reset (same random draws) through the indices of the finished envs."""
        import torch

        idx = torch.where(done)[0]  # one-argument where: a nonzero, the host waits for the count
        self.pos[idx] = self._random_cells()[idx]
        self.goal[idx] = self._random_cells()[idx]
        self.t[idx] = 0


class PPOWorkload(Workload):
    name = "ppo"

    def __init__(self, config: Config, device: str = "auto"):
        import torch

        super().__init__(config, device)
        cfg = config
        self._gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self._envs = _GridEnvs(cfg.envs, cfg.grid, self.device, self._gen, cfg.nonzero_reset)
        self._model = seeded_init(cfg.seed, lambda: _policy(cfg)).to(self.device)
        self._forward = self._model
        if cfg.compile:
            self._forward = torch.compile(self._model, backend=cfg.compile_backend)
        fused = {"fused": True} if cfg.fused_adam else {}
        self._optim = torch.optim.Adam(self._model.parameters(), lr=cfg.lr, **fused)
        self._acc = torch.zeros(len(METRICS) + 2, device=self.device)
        self._logged: dict[str, list[float]] = {m: [] for m in METRICS}
        self._iteration = 0

    def compile_inputs(self) -> dict:
        """``model``, ``example_inputs`` and ``shape_variants`` for ``perfkit.compile_ab``: the
        policy, an observation batch and, with ``stats_flag``, the call with the flag flipped
        (the two calls this workload's forward alternates between)."""
        obs = self._envs.obs.clone()
        flip = self.config.stats_flag
        return {"model": self._model, "example_inputs": (obs, False) if flip else (obs,),
                "shape_variants": [(obs, True)] if flip else []}

    def _autocast(self):
        import torch

        kind = "cuda" if self.device.startswith("cuda") else "cpu"
        return torch.autocast(kind, dtype=torch.bfloat16, enabled=self.config.amp)

    def _step(self) -> dict:
        batch = self._collect()
        for _ in range(self.config.epochs):
            for idx in self._minibatches():
                self._update({k: v[idx] for k, v in batch.items()})
        self._iteration += 1
        return self._report()

    def _collect(self) -> dict:
        """Roll out ``rollout`` steps of every env; returns flat tensors of envs*rollout rows."""
        import torch

        keys = ("obs", "action", "logp", "value", "reward", "done")
        steps = {k: [] for k in keys}
        with torch.no_grad():
            last = self.config.rollout - 1
            for t in range(self.config.rollout):
                for key, value in zip(keys, self._env_step(self.config.stats_flag and t == last)):
                    steps[key].append(value)
            with self._autocast():
                _, last_value = self._forward(self._envs.obs)
        seq = {k: torch.stack(v) for k, v in steps.items()}
        adv, ret = self._gae(seq["reward"], seq["value"], seq["done"], last_value.float())
        batch = {k: seq[k].flatten(0, 1) for k in ("obs", "action", "logp")}
        return {**batch, "adv": adv.flatten(), "ret": ret.flatten()}

    def _env_step(self, record_stats: bool = False) -> tuple:
        """Act in every env once; returns (obs, action, logp, value, reward, done)."""
        import torch

        obs = self._envs.obs.clone()  # the envs re-render their observation in place
        with self._autocast():
            logits, value = self._forward(obs, record_stats)
        log_probs = logits.log_softmax(-1)
        action = torch.multinomial(log_probs.exp(), 1, generator=self._gen).squeeze(1)
        reward, done = self._envs.step(action)
        self._log_reward(reward)
        return obs, action, log_probs.gather(1, action[:, None]).squeeze(1), value, reward, done

    def _gae(self, rewards, values, dones, last_value):
        import torch

        cfg = self.config
        adv = torch.zeros_like(rewards)
        running = torch.zeros_like(last_value)
        next_value = last_value
        for t in reversed(range(rewards.shape[0])):
            keep = 1.0 - dones[t]
            delta = rewards[t] + cfg.gamma * next_value * keep - values[t]
            running = delta + cfg.gamma * cfg.gae_lambda * keep * running
            adv[t] = running
            next_value = values[t]
        return adv, adv + values

    def _minibatches(self):
        import torch

        n, size = self.config.envs * self.config.rollout, self.config.minibatch
        perm = torch.randperm(n, generator=self._gen, device=self.device)
        return perm[: n - n % size].view(-1, size)

    def _update(self, mb: dict) -> None:
        cfg = self.config
        with self._autocast():
            logits, value = self._forward(mb["obs"])
        log_probs = logits.log_softmax(-1)
        logp = log_probs.gather(1, mb["action"][:, None]).squeeze(1)
        adv = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
        ratio = (logp - mb["logp"]).exp()
        policy_loss = -(ratio * adv).min((ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv)).mean()
        entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
        loss = policy_loss + 0.5 * (value - mb["ret"]).pow(2).mean() - 0.01 * entropy
        if "loss" in NAN_CHECK_SITES[: cfg.nan_checks]:
            _check_nan(loss, "loss")
        self._optim.zero_grad(set_to_none=True)
        loss.backward()
        self._optim.step()
        self._log_update(loss.detach(), entropy.detach())

    def _log_reward(self, reward) -> None:
        if self.config.log_every_step_item:
            self._logged["reward"].append(reward.mean().item())
        else:
            self._acc[0] += reward.mean()
            self._acc[3] += 1

    def _log_update(self, loss, entropy) -> None:
        if self.config.log_every_step_item:
            self._logged["loss"].append(loss.item())
            self._logged["entropy"].append(entropy.item())
        else:
            self._acc[1] += loss
            self._acc[2] += entropy
            self._acc[4] += 1

    def _report(self) -> dict:
        out = self._metrics()
        if out and self.config.stats_flag and self._model.hidden_absmax is not None:
            out["hidden_absmax"] = float(self._model.hidden_absmax)  # read with the metrics
        return out

    def _metrics(self) -> dict:
        if self.config.log_every_step_item:
            out = {m: sum(v) / len(v) for m, v in self._logged.items()}
            self._logged = {m: [] for m in METRICS}
            return out
        if self._iteration % self.config.metrics_every:
            return {}
        reward, loss, entropy, n_env, n_upd = self._acc.tolist()  # the one read per window
        self._acc.zero_()
        return {"reward": reward / n_env, "loss": loss / n_upd, "entropy": entropy / n_upd}
