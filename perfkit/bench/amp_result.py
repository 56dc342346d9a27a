"""The result of ``amp_ab``: fp32 vs autocast step times, loss curves, memory and syncs per arm,
the fused-optimizer A/B, and the findings drawn from them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from .compare import ABResult, inconclusive_finding

ARMS = ("fp32", "amp")


@dataclass(frozen=True)
class AMPResult:
    """fp32 (A) vs autocast (B). Times in seconds, memory in bytes, losses as returned by loss_fn."""

    timing: ABResult
    losses_fp32: tuple[float, ...]
    losses_amp: tuple[float, ...]
    device: str
    dtype: str
    scaler: bool
    optimizer: str
    peak_bytes: dict
    memory_method: str
    saved_bytes: dict
    syncs_per_step: dict | None = None
    fused_timing: ABResult | None = None
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """"faster" means the autocast step is faster than fp32; "inconclusive: ..." when the timing
        supports none (``ABResult.conclusion``)."""
        return self.timing.conclusion

    @property
    def speedup(self) -> float:
        return self.timing.speedup

    @property
    def loss_abs_diff(self) -> np.ndarray:
        return np.abs(np.asarray(self.losses_amp) - np.asarray(self.losses_fp32))

    @property
    def loss_max_abs_diff(self) -> float:
        return float(np.max(self.loss_abs_diff)) if self.losses_fp32 else math.nan

    @property
    def loss_max_rel_diff(self) -> float:
        """max |loss_amp - loss_fp32| / |loss_fp32| over the steps."""
        if not self.losses_fp32:
            return math.nan
        ref = np.maximum(np.abs(np.asarray(self.losses_fp32)), 1e-12)
        return float(np.max(self.loss_abs_diff / ref))

    def to_frame(self) -> pd.DataFrame:
        """One row per training step: ``step``, ``loss_fp32``, ``loss_amp``, ``abs_diff``, ``rel_diff``."""
        ref = np.maximum(np.abs(np.asarray(self.losses_fp32, dtype=float)), 1e-12)
        return pd.DataFrame({"step": range(len(self.losses_fp32)), "loss_fp32": self.losses_fp32,
                             "loss_amp": self.losses_amp, "abs_diff": self.loss_abs_diff,
                             "rel_diff": self.loss_abs_diff / ref})

    def summary(self) -> dict:
        out = {"device": self.device, "dtype": self.dtype, "scaler": self.scaler,
               "fp32_median_s": self.timing.median_a, "amp_median_s": self.timing.median_b,
               "speedup": self.speedup, "ci_low": self.timing.speedup_ci[0],
               "ci_high": self.timing.speedup_ci[1], "verdict": self.verdict,
               "loss_max_abs_diff": self.loss_max_abs_diff, "loss_max_rel_diff": self.loss_max_rel_diff}
        for arm in ARMS:
            out[f"peak_bytes_{arm}"] = self.peak_bytes.get(arm)
            out[f"saved_bytes_{arm}"] = self.saved_bytes.get(arm)
            out[f"syncs_per_step_{arm}"] = (self.syncs_per_step or {}).get(arm)
        if self.fused_timing is not None:
            out["fused_step_speedup"] = self.fused_timing.speedup
            out["fused_verdict"] = self.fused_timing.conclusion
        return out

    def __repr__(self) -> str:
        return (f"AMPResult({self.dtype} on {self.device}: speedup={self.speedup:.3g}x {self.verdict}, "
                f"loss max rel diff={self.loss_max_rel_diff:.3g}, findings={len(self.findings)})")

    def _repr_html_(self) -> str:
        frame = pd.DataFrame([self.summary()])
        return html_section(f"AMP A/B ({self.dtype}, {self.device})", html_table(frame),
                            html_table(findings_frame(self.findings)), html_warnings(self.warnings))


def amp_findings(r: AMPResult, loss_rtol: float) -> tuple[Finding, ...]:
    """What ``r`` calls for, most severe first; ``loss_rtol``: the loss divergence allowed."""
    found = [_speed_finding(r), _loss_finding(r, loss_rtol), _sync_finding(r), _fused_finding(r)]
    return rank_findings(f for f in found if f is not None)


def _speed_finding(r: AMPResult) -> Finding:
    evidence = {"speedup": r.speedup, "ci_low": r.timing.speedup_ci[0], "ci_high": r.timing.speedup_ci[1],
                "n": r.timing.n}
    threshold = f"{r.timing.test.confidence:.0%} CI beyond a {r.timing.test.min_effect:.0%} minimum effect"
    unreliable = inconclusive_finding(r.timing, f"{r.dtype} autocast A/B")
    if unreliable is not None:
        return unreliable
    if r.verdict == "faster":
        return Finding("medium", f"{r.dtype} autocast step is {r.speedup:.2f}x the fp32 speed on {r.device}",
                       evidence, f"Train under torch.autocast('{r.device.split(':')[0]}', dtype=torch.{r.dtype})",
                       threshold)
    if r.verdict == "slower":
        return Finding("medium", f"{r.dtype} autocast is slower than fp32 on {r.device}", evidence,
                       f"Autocast casts the inputs of each matmul to {r.dtype}: a step of small matmuls pays the "
                       "casts and gains nothing from the Tensor Cores (on an H100, a 64x32->128 policy MLP ran 0.86x "
                       "under bf16, a 4096x512->2048 one 2.47x). Keep fp32 for this model; if autocast must stay, "
                       "profile for aten::_to_copy casts and check the Tensor Core share (perfkit gpu-kernels)", threshold)
    why = ("on a GPU a step that does not gain is not bound by its matmuls (they are small, or the host bounds the "
           "step: perfkit diagnose)" if r.device.startswith("cuda") else
           "on a CPU, AMP pays off only with AMX or AVX512-BF16 matrix units")
    return Finding("low", f"no detectable step-time gain from {r.dtype} autocast on {r.device} ({r.verdict})",
                   evidence, f"Keep fp32 unless activation memory is the limit: {why}", threshold)


def _loss_finding(r: AMPResult, loss_rtol: float) -> Finding | None:
    amp = np.asarray(r.losses_amp, dtype=float)
    if np.all(np.isfinite(amp)) and r.loss_max_rel_diff <= loss_rtol:
        return None
    bad = int(np.argmax(~np.isfinite(amp))) if not np.all(np.isfinite(amp)) else None
    title = (f"{r.dtype} loss became non-finite at step {bad}" if bad is not None else
             f"{r.dtype} loss curve departs from fp32 by up to {r.loss_max_rel_diff:.1%}")
    return Finding("high", title, {"max_abs_diff": r.loss_max_abs_diff, "max_rel_diff": r.loss_max_rel_diff,
                                   "steps": len(r.losses_fp32)},
                   "Keep sensitive ops in fp32 (autocast already does for losses, softmax and norms; check "
                   "custom ops), lower the learning rate, or on CUDA compare fp16 with GradScaler",
                   f"loss_rtol={loss_rtol:g} (relative to the fp32 loss)")


def _sync_finding(r: AMPResult) -> Finding | None:
    if not r.syncs_per_step or r.syncs_per_step["amp"] <= r.syncs_per_step["fp32"]:
        return None
    extra = r.syncs_per_step["amp"] - r.syncs_per_step["fp32"]
    return Finding("medium", f"autocast step adds {extra:.3g} host sync(s) per step (GradScaler)",
                   dict(r.syncs_per_step),
                   "Use bfloat16 autocast, which needs no GradScaler, where the GPU supports it; otherwise "
                   "accept the scaler's one sync and avoid adding more (.item() on the loss every step)",
                   "syncs counted by torch.cuda.set_sync_debug_mode('warn')")


def _fused_finding(r: AMPResult) -> Finding | None:
    ft = r.fused_timing
    if ft is None or ft.conclusion != "faster":
        return None
    return Finding("low", f"fused {r.optimizer} step is {ft.speedup:.2f}x the {ft.labels[0]} speed",
                   {"speedup": ft.speedup, "ci_low": ft.speedup_ci[0], "ci_high": ft.speedup_ci[1]},
                   f"Construct the optimizer with fused=True: torch.optim.{_class_name(r.optimizer)}(..., fused=True)",
                   "optimizer.step() A/B, same CI rule as the step time")


def _class_name(optimizer: str) -> str:
    return {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD"}[optimizer]
