"""A pixel replay pipeline (Dreamer style): uint8 frames on the host, sequences to the device.

The replay buffer holds ``capacity`` frames of ``channels`` x ``frame_size`` x ``frame_size``
uint8 pixels in host memory (numpy; synthetic moving-square frames). Each ``step()`` samples
``batch`` sequences of ``seq_len`` consecutive frames at random starts (host RNG, as replay
samplers do), moves them to the device, runs a small conv encoder and a next-frame predictor
forward and backward, and takes an Adam step.

Pathology switches (see :func:`variants`):

* ``normalize_on="host"``: ``float32`` conversion and ``/255`` on the host, then the copy moves
  4x the bytes; ``"device"`` copies uint8 and converts on the device.
* ``stack="cat"``: ``torch.stack`` of a list of per-sequence slices every step (fresh
  allocation); ``"preallocated"`` gathers with one ``index_select(out=...)`` into a staging
  tensor allocated once.
* ``pin_memory=True``: the staging tensor is page-locked so the copy can be asynchronous. It
  needs CUDA and ``stack="preallocated"``: otherwise it is skipped and the reason is added to
  ``workload.notes``.

Each step is two ``torch.profiler.record_function`` ranges: ``## train/sample ##`` (sample,
gather, copy to the device, normalize) and ``## train/update ##`` (forward, backward, Adam), so
a trace shows each phase as a ``user_annotation`` event per step.

``step()`` returns ``{}`` unless ``log_every_step=True``: then ``{"loss": float}`` (one sync).
``bytes_per_batch`` is the host-to-device copy size of one batch, in bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Workload, build_config, check_bool, check_choice, check_int, seeded_init

NORMALIZE_ON = ("host", "device")
STACK = ("cat", "preallocated")
# record_function names of the two phases of a step, spelled like the world-model write-up's
# ``## train/sample ##`` range, so traces of two runs can be compared phase by phase.
SAMPLE_ANNOTATION = "## train/sample ##"
UPDATE_ANNOTATION = "## train/update ##"


@dataclass(frozen=True)
class Config:
    """Sizes and switches of the replay pipeline; defaults are tiny and pathology-free."""

    capacity: int = 512
    channels: int = 3
    frame_size: int = 32
    batch: int = 8
    seq_len: int = 8
    conv_channels: int = 16
    latent: int = 64
    lr: float = 1e-3
    normalize_on: str = "device"
    pin_memory: bool = False
    stack: str = "preallocated"
    log_every_step: bool = False
    seed: int = 0

    def __post_init__(self):
        for name in ("channels", "batch", "conv_channels", "latent"):
            check_int(name, getattr(self, name))
        check_int("frame_size", self.frame_size, 8)
        check_int("seq_len", self.seq_len, 2)
        check_int("capacity", self.capacity, self.seq_len)
        check_int("seed", self.seed, 0)
        check_choice("normalize_on", self.normalize_on, NORMALIZE_ON)
        check_choice("stack", self.stack, STACK)
        check_bool("pin_memory", self.pin_memory)
        check_bool("log_every_step", self.log_every_step)


def variants() -> dict:
    """Host normalization with per-step stacking, and the device-side, preallocated fix."""
    return {
        "host_normalize": Config(normalize_on="host", stack="cat", pin_memory=False),
        "device_normalize": Config(normalize_on="device", stack="preallocated", pin_memory=True),
    }


def make(config: Config | None = None, device: str = "auto", **overrides) -> "ReplayWorkload":
    """Build the replay pipeline; ``overrides`` replace Config fields (ParameterError if unknown)."""
    return ReplayWorkload(build_config(Config, config, overrides), device)


def synthetic_frames(cfg: Config) -> np.ndarray:
    """``capacity`` uint8 frames (N, C, H, W): a square drifting over noise, so sequences
    are temporally coherent like real episodes."""
    rng = np.random.default_rng(cfg.seed)
    n, c, s = cfg.capacity, cfg.channels, cfg.frame_size
    frames = rng.integers(0, 64, size=(n, c, s, s), dtype=np.uint8)
    side = max(2, s // 4)
    for i in range(n):
        y, x = (i * 3) % (s - side), (i * 5) % (s - side)
        frames[i, :, y : y + side, x : x + side] = 255
    return frames


def _networks(cfg: Config):
    import torch.nn as nn

    s = cfg.frame_size // 4
    encoder = nn.Sequential(
        nn.Conv2d(cfg.channels, cfg.conv_channels, 4, stride=2, padding=1), nn.ELU(),
        nn.Conv2d(cfg.conv_channels, 2 * cfg.conv_channels, 4, stride=2, padding=1), nn.ELU(),
        nn.Flatten(), nn.Linear(2 * cfg.conv_channels * s * s, cfg.latent),
    )
    predictor = nn.Sequential(
        nn.Linear(cfg.latent, cfg.latent), nn.ELU(), nn.Linear(cfg.latent, cfg.channels * s * s)
    )
    return nn.ModuleDict({"encoder": encoder, "predictor": predictor})


class ReplayWorkload(Workload):
    name = "replay"

    def __init__(self, config: Config, device: str = "auto"):
        import torch

        super().__init__(config, device)
        cfg = config
        self._frames = synthetic_frames(cfg)
        self._frames_t = torch.from_numpy(self._frames)
        self._rng = np.random.default_rng(cfg.seed)
        self._pin = self._resolve_pin()
        self._staging = self._allocate_staging() if cfg.stack == "preallocated" else None
        self._copied = None  # CUDA event recorded after the last async copy out of pinned staging
        self._nets = seeded_init(cfg.seed, lambda: _networks(cfg)).to(self.device)
        # fused: one kernel per step and no per-parameter .item() on the step counters
        self._optim = torch.optim.Adam(self._nets.parameters(), lr=cfg.lr, fused=True)

    @property
    def bytes_per_batch(self) -> int:
        """Bytes copied host-to-device per step: 4x more with ``normalize_on="host"``."""
        cfg = self.config
        pixels = cfg.batch * cfg.seq_len * cfg.channels * cfg.frame_size**2
        return pixels * (4 if cfg.normalize_on == "host" else 1)

    def _resolve_pin(self) -> bool:
        if not self.config.pin_memory:
            return False
        if self.config.stack == "cat":
            self.notes.append("pin_memory=True skipped: stack='cat' builds a new batch each step, "
                              "there is no staging buffer to pin; use stack='preallocated'")
            return False
        if not self.device.startswith("cuda"):
            self.notes.append(
                f"pin_memory=True skipped: pinned host memory needs a CUDA device (device is {self.device})"
            )
            return False
        return True

    def _allocate_staging(self) -> dict:
        import torch

        cfg = self.config
        shape = (cfg.batch * cfg.seq_len, cfg.channels, cfg.frame_size, cfg.frame_size)
        dtype = torch.float32 if cfg.normalize_on == "host" else torch.uint8
        staging = {"batch": torch.empty(shape, dtype=dtype, pin_memory=self._pin)}
        if cfg.normalize_on == "host":
            staging["gather"] = torch.empty(shape, dtype=torch.uint8)
        return staging

    def _step(self) -> dict:
        from torch.profiler import record_function

        with record_function(SAMPLE_ANNOTATION):
            x = self._sample()
        with record_function(UPDATE_ANNOTATION):
            loss = self._train(x)
        return {"loss": loss.item()} if self.config.log_every_step else {}

    def _sample(self):
        """One device batch (batch*seq_len, C, H, W) of float32 pixels in [0, 1]."""
        starts = self._rng.integers(0, self.config.capacity - self.config.seq_len + 1, size=self.config.batch)
        host = self._gather(starts)
        x = host.to(self.device, non_blocking=self._pin)
        if self._pin and self._staging is not None:
            self._copied = self._record_copy()
        if self.config.normalize_on == "device":
            x = x.float().div_(255.0)
        return x

    def _gather(self, starts: np.ndarray):
        """Host batch of shape (batch*seq_len, C, H, W): uint8, or float32 in [0, 1] when
        normalizing on the host."""
        import torch

        cfg = self.config
        if self._staging is None:
            seqs = [self._frames[s : s + cfg.seq_len] for s in starts]
            if cfg.normalize_on == "host":
                seqs = [seq.astype(np.float32) / 255.0 for seq in seqs]
            return torch.stack([torch.from_numpy(seq) for seq in seqs]).flatten(0, 1)
        index = torch.from_numpy((starts[:, None] + np.arange(cfg.seq_len)).reshape(-1))
        if self._copied is not None:
            # The previous async copy may still be reading the pinned staging buffer.
            self._copied.synchronize()
        if cfg.normalize_on == "host":
            torch.index_select(self._frames_t, 0, index, out=self._staging["gather"])
            return self._staging["batch"].copy_(self._staging["gather"]).div_(255.0)
        return torch.index_select(self._frames_t, 0, index, out=self._staging["batch"])

    def _record_copy(self):
        import torch

        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event

    def _train(self, x):
        """Predict each next frame, 4x downsampled, from the current frame's latent."""
        import torch.nn.functional as F

        cfg = self.config
        z = self._nets["encoder"](x).view(cfg.batch, cfg.seq_len, cfg.latent)
        target = F.avg_pool2d(x, 4).view(cfg.batch, cfg.seq_len, -1)
        loss = (self._nets["predictor"](z[:, :-1]) - target[:, 1:]).pow(2).mean()
        self._optim.zero_grad(set_to_none=True)
        loss.backward()
        self._optim.step()
        return loss.detach()
