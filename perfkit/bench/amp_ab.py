"""fp32 vs autocast (bf16, or fp16 + GradScaler on CUDA) training steps, measured honestly.

``amp_ab(make_model, make_batch, loss_fn)`` reports:

* step time A/B with a CI (``perfkit.bench.compare``; A = fp32, B = autocast);
* loss divergence: both arms train ``steps`` steps from the same seed on the same batches;
  max absolute and relative difference of the two loss curves;
* memory, per arm: on CUDA the peak of ``torch.cuda.max_memory_allocated`` above the arm's
  starting point; on CPU the growth of process RSS (psutil) over the arm's run, which is
  coarse (allocator caching, order effects). On both, the bytes autograd saved for backward
  in one step (unique storages, via ``torch.autograd.graph.saved_tensors_hooks``): the
  activation memory autocast is meant to shrink;
* host syncs per step: counted on CUDA by ``torch.cuda.set_sync_debug_mode("warn")`` (every
  sync raises a warning we count); not measurable on CPU, where there is no device to wait
  for, so the result holds ``None`` and says so;
* the fused-optimizer alternative: ``optimizer.step()`` alone, default implementation vs
  ``fused=True`` (Adam/AdamW; fused Adam runs on CPU and CUDA in torch >= 2.4).

The result type and its findings are in ``amp_result``.
"""
from __future__ import annotations

import gc
import warnings as pywarnings
from dataclasses import dataclass, replace
from typing import Callable

import psutil

from ..detect.syncdebug import SYNC_DEBUG_MESSAGE
from ..errors import ParameterError
from .amp_result import ARMS, AMPResult, amp_findings
from .compare import ABResult, compare
from ..stats import check_knobs
from .timing import Clock, check_counts, resolve_timing_device

# torch is heavy and optional: the functions below import it when the A/B runs.
OPTIMIZERS = ("adam", "adamw", "sgd")
# Syncs counted over this many steps per arm on CUDA.
_SYNC_STEPS = 3


def amp_ab(make_model: Callable[[], object], make_batch: Callable[[int], tuple], loss_fn: Callable, *,
           steps: int = 20, device: str = "auto", dtype: str = "bfloat16", optimizer: str = "adam",
           fused: bool | None = None, lr: float = 1e-3, seed: int = 0, repeats: int | None = None,
           warmup: int = 3, min_time_s: float = 1.0, confidence: float = 0.95, min_effect: float = 0.02,
           loss_rtol: float = 0.05, compare_fused: bool = True, clock: Clock | None = None) -> AMPResult:
    """A/B one training step in fp32 against the same step under ``torch.autocast``.

    ``make_model()`` builds the model (called under ``torch.manual_seed(seed)`` for each arm);
    ``make_batch(step)`` returns ``(inputs, target)`` (``inputs`` a tensor or tuple); the loss
    is ``loss_fn(model(*inputs), target)``. ``dtype`` is "bfloat16" or "float16"; float16
    uses ``torch.amp.GradScaler`` and runs only on CUDA (on CPU it falls back to bfloat16
    with a warning). ``optimizer`` is "adam", "adamw" or "sgd"; ``fused`` is passed to it
    (None: torch's default). Loss curves differing by more than ``loss_rtol`` (relative)
    produce a finding. ``repeats``/``warmup``/``min_time_s``/``confidence``/``min_effect``
    go to ``compare``. Raises ParameterError for bad arguments.
    """
    dev = resolve_timing_device(device)
    _check(optimizer, steps, loss_rtol)
    check_knobs(confidence, min_effect)
    check_counts(repeats=repeats, warmup=warmup, inner=1, min_time_s=min_time_s)
    amp_dtype, scaler, notes = _resolve_dtype(dtype, dev)
    cfg = _Config(make_model, make_batch, loss_fn, dev, amp_dtype, scaler, optimizer, fused, lr, seed)
    for arm in ARMS:  # one throwaway step each, so one-time set-up is not charged to the first arm
        _Arm(cfg, autocast=(arm == "amp")).step(cfg.batch(0))
    runs = {arm: _train_curve(cfg, arm, steps) for arm in ARMS}  # arm -> (runner, losses, peak, method)
    arms, batch = {arm: run[0] for arm, run in runs.items()}, cfg.batch(0)
    timing_kw = dict(repeats=repeats, warmup=warmup, min_time_s=min_time_s, device=dev, clock=clock,
                     confidence=confidence, min_effect=min_effect, seed=seed)
    timing = compare(lambda: arms["fp32"].step(batch), lambda: arms["amp"].step(batch),
                     labels=("fp32", f"{_name(amp_dtype)}-autocast"), **timing_kw)
    syncs = {arm: _syncs_per_step(arms[arm], batch) for arm in ARMS} if dev.startswith("cuda") else None
    fused_timing, fused_notes = _fused_ab(cfg, batch, timing_kw) if compare_fused else (None, [])
    result = AMPResult(timing, tuple(runs["fp32"][1]), tuple(runs["amp"][1]), dev, _name(amp_dtype), scaler,
                       optimizer, {arm: run[2] for arm, run in runs.items()}, runs["fp32"][3],
                       {arm: _saved_bytes(arms[arm], batch) for arm in ARMS}, syncs, fused_timing,
                       warnings=tuple(notes + _device_notes(dev) + fused_notes + list(timing.warnings)),
                       environment=timing.environment)
    return replace(result, findings=amp_findings(result, loss_rtol))


def _check(optimizer: str, steps: int, loss_rtol: float) -> None:
    if optimizer not in OPTIMIZERS:
        raise ParameterError(f"optimizer={optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if not isinstance(steps, int) or steps < 2:
        raise ParameterError(f"steps={steps!r}: pass an int >= 2 (training steps for the loss curves)")
    if not loss_rtol > 0:
        raise ParameterError(f"loss_rtol={loss_rtol}: must be > 0 (0.05 = 5% relative difference)")


def _resolve_dtype(dtype, device: str):
    import torch

    names = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    chosen = names.get(dtype) if isinstance(dtype, str) else dtype
    if chosen not in (torch.bfloat16, torch.float16):
        raise ParameterError(f"dtype={dtype!r}: use 'bfloat16' or 'float16'")
    if chosen is torch.float16 and not device.startswith("cuda"):
        return torch.bfloat16, False, [
            f"float16 autocast with GradScaler is measured only on CUDA; no GPU on device={device!r}, "
            "so bfloat16 (no GradScaler) was measured instead"]
    return chosen, chosen is torch.float16, []


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _device_notes(device: str) -> list[str]:
    if device.startswith("cuda"):
        return []
    return ["host syncs per step are counted only on CUDA (torch.cuda.set_sync_debug_mode); "
            "on CPU there is no device to wait for, so host syncs per step are not measured (n/a)",
            "CPU memory is process RSS growth over each arm's run (psutil): coarse, includes "
            "allocator caching; saved_bytes (tensors saved for backward) is exact"]


@dataclass(frozen=True)
class _Config:
    make_model: Callable
    make_batch: Callable
    loss_fn: Callable
    device: str
    amp_dtype: object
    scaler: bool
    optimizer: str
    fused: bool | None
    lr: float
    seed: int

    def batch(self, step: int) -> tuple[tuple, object]:
        inputs, target = _unpack_batch(self.make_batch(step))
        return tuple(_move(x, self.device) for x in inputs), _move(target, self.device)


def _unpack_batch(batch) -> tuple[tuple, object]:
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ParameterError("make_batch(step) must return (inputs, target); inputs may be a tensor or a tuple")
    inputs, target = batch
    return (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), target


def _move(x, device: str):
    import torch

    return x.to(device) if isinstance(x, torch.Tensor) else x


class _Arm:
    """One model + optimizer (+ scaler) whose ``step(batch)`` runs one training step."""

    def __init__(self, cfg: _Config, autocast: bool):
        import torch

        torch.manual_seed(cfg.seed)
        self.model = cfg.make_model().to(cfg.device)
        self.opt = make_optimizer(cfg.optimizer, self.model.parameters(), lr=cfg.lr, fused=cfg.fused)
        self.cfg, self.autocast = cfg, autocast
        use_scaler = autocast and cfg.scaler
        self.scaler = torch.amp.GradScaler(cfg.device.split(":")[0]) if use_scaler else None

    def forward_loss(self, batch):
        import torch

        inputs, target = batch
        kind = self.cfg.device.split(":")[0]
        with torch.autocast(kind, dtype=self.cfg.amp_dtype, enabled=self.autocast):
            return self.cfg.loss_fn(self.model(*inputs), target)

    def step(self, batch):
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward_loss(batch)
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        return loss.detach()


def make_optimizer(name: str, params, *, lr: float = 1e-3, fused: bool | None = None):
    """torch.optim Adam/AdamW/SGD with ``fused`` passed only when set."""
    import torch

    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[name]
    return cls(params, lr=lr, **({} if fused is None else {"fused": fused}))


def _train_curve(cfg: _Config, arm: str, steps: int):
    """Build the arm, train ``steps`` steps on make_batch(0..steps-1); returns
    (arm, losses, peak bytes, memory method)."""
    import torch

    cuda = cfg.device.startswith("cuda")
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(cfg.device)
    start = torch.cuda.memory_allocated(cfg.device) if cuda else _rss()
    runner = _Arm(cfg, autocast=(arm == "amp"))
    losses = [runner.step(cfg.batch(i)) for i in range(steps)]
    values = [float(v) for v in torch.stack([v.float() for v in losses]).cpu().tolist()]
    if cuda:
        return runner, values, int(torch.cuda.max_memory_allocated(cfg.device) - start), "cuda max_memory_allocated"
    return runner, values, int(_rss() - start), "process RSS growth (psutil)"


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _saved_bytes(runner: _Arm, batch) -> int:
    """Bytes of unique storages autograd saves for backward in one forward of ``runner``."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        runner.forward_loss(batch)
    return int(sum(seen.values()))


def _syncs_per_step(runner: _Arm, batch) -> float:
    """Host-device syncs per training step on CUDA, via sync debug mode warnings."""
    import torch

    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.synchronize()
    try:
        with pywarnings.catch_warnings(record=True) as caught:
            pywarnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            for _ in range(_SYNC_STEPS):
                runner.step(batch)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    return sum(SYNC_DEBUG_MESSAGE in str(w.message) for w in caught) / _SYNC_STEPS


def _fused_ab(cfg: _Config, batch, timing_kw: dict) -> tuple[ABResult | None, list[str]]:
    """Time optimizer.step() alone: torch's default implementation vs fused=True."""
    import torch

    if cfg.optimizer not in ("adam", "adamw"):
        return None, [f"fused optimizer comparison covers adam/adamw only, not {cfg.optimizer!r}"]
    torch.manual_seed(cfg.seed)
    model = cfg.make_model().to(cfg.device)
    cfg.loss_fn(model(*batch[0]), batch[1]).backward()
    default = "foreach" if cfg.device.startswith("cuda") else "for-loop"
    try:
        opts = [make_optimizer(cfg.optimizer, model.parameters(), lr=cfg.lr, fused=f) for f in (None, True)]
        opts[1].step()
    except (RuntimeError, TypeError, ValueError) as exc:
        return None, [f"fused {cfg.optimizer} is not available here ({exc}); comparison skipped"]
    labels = (f"{cfg.optimizer}({default})", f"{cfg.optimizer}(fused)")
    return compare(opts[0].step, opts[1].step, labels=labels, **timing_kw), []
