"""GradScaler's host sync, counted: where a CPU shows the count of a cost only a GPU shows.

``scaler.step(optimizer)`` checks the gradients for inf/NaN; with a default (for-each or for-loop)
optimizer it reads the result with ``.item()``, a host-device sync every step. A fused optimizer
(``Adam(fused=True)``) takes the inf flag as a tensor and skips the step on the device, so the sync
disappears. ``gradscaler_syncs`` runs a small MLP training step under ``perfkit.detect_syncs()``
in three set-ups and counts the syncing calls per step with their source lines. On a CPU the
detector treats CPU tensors as device tensors ("cpu-as-device"): the count is what a GPU would do,
the cost is not measured here.
"""
from __future__ import annotations

import pandas as pd

from ..detect.runtime import detect_syncs
from ..device import resolve_device
from ..errors import ParameterError
from ..workloads.mlp import mlp_problem

SETUPS = (("fp32, Adam (default)", False, False), ("fp16 + GradScaler, Adam (default)", True, False),
          ("fp16 + GradScaler, Adam (fused)", True, True))


def scaler_step_syncs(*, scaler: bool, fused: bool, steps: int = 3, device: str = "auto", problem=None):
    """The ``SyncReport`` of ``steps`` training steps (after one untimed step) of ``problem``
    (default: a small ``mlp_problem``) with Adam (``fused``) and, with ``scaler``, float16
    autocast and ``torch.amp.GradScaler``. Raises ParameterError for steps < 1."""
    import torch

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ParameterError(f"steps={steps!r}: pass an int >= 1")
    dev = resolve_device(device)
    kind = dev.split(":")[0]
    p = problem or mlp_problem(batch=16, features=16, hidden=32, layers=1)
    model = p.make_model().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
    grad_scaler = torch.amp.GradScaler(kind) if scaler else None
    inputs, target = (t.to(dev) for t in (p.make_batch(0)[0][0], p.make_batch(0)[1]))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(kind, dtype=torch.float16, enabled=scaler):
            loss = p.loss_fn(model(inputs), target)
        if grad_scaler is None:
            loss.backward()
            opt.step()
            return
        grad_scaler.scale(loss).backward()
        grad_scaler.step(opt)
        grad_scaler.update()

    step()
    with detect_syncs() as detector:
        for _ in range(steps):
            step()
    return detector.report


def gradscaler_syncs(*, steps: int = 3, device: str = "auto") -> pd.DataFrame:
    """Syncing calls per training step in each of ``SETUPS``: columns ``setup``, ``scaler``,
    ``fused``, ``syncs_per_step``, ``syncing_ops`` ("GradScaler.step x3": the op and its calls; the
    source line is this module's), ``mode`` (the detector's)."""
    rows = []
    for label, scaler, fused in SETUPS:
        report = scaler_step_syncs(scaler=scaler, fused=fused, steps=steps, device=device)
        ops = "; ".join(f"{e.op} x{e.count}" for e in report.events)
        rows.append({"setup": label, "scaler": scaler, "fused": fused, "syncs_per_step": report.total / steps,
                     "syncing_ops": ops, "mode": report.mode})
    return pd.DataFrame(rows)
