"""How loaded the machine was when a trace was recorded, as ``perfkit profile`` writes it into the trace's
metadata (``perfkit_profile``: ``load_1min``, ``cpus``, ``torch_threads``, taken as recording starts).

Traces from elsewhere carry none of it: every field is then None and nothing is judged from it. A value of
the wrong type (a hand-edited file) counts as absent.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..cpus import busy as cpus_busy


@dataclass(frozen=True)
class Machine:
    """``load_1min``: 1-minute load average; ``cpus``: the CPUs the recording process could run on;
    ``torch_threads``: torch's intra-op thread count. None: not recorded."""

    load_1min: float | None = None
    cpus: int | None = None
    torch_threads: int | None = None

    @property
    def known(self) -> bool:
        return self.load_1min is not None and self.cpus is not None

    @property
    def busy(self) -> bool:
        """More runnable tasks than CPUs while recording (``perfkit.cpus.busy``); False when not recorded."""
        return self.known and cpus_busy(self.load_1min, self.cpus)

    @property
    def per_cpu(self) -> float | None:
        """The load average per CPU (1.0: every CPU taken); None when not recorded."""
        return self.load_1min / self.cpus if self.known else None

    def text(self) -> str:
        """"load average 3.1 on 2 CPUs, 2 torch threads", "" when nothing was recorded."""
        parts = [f"load average {self.load_1min:.1f} on {self.cpus} CPU{'s' if self.cpus != 1 else ''}"] \
            if self.known else []
        if self.torch_threads is not None:
            parts.append(f"{self.torch_threads} torch thread{'s' if self.torch_threads != 1 else ''}")
        return ", ".join(parts)


def recorded_machine(trace) -> Machine:
    """The machine load ``perfkit profile`` recorded in the first file of ``trace`` that has it."""
    meta = next((f.recorder for f in trace.files if getattr(f, "recorder", None)), {})
    return Machine(_number(meta.get("load_1min"), float), _number(meta.get("cpus"), int),
                   _number(meta.get("torch_threads"), int))


def _number(value, kind):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    if kind is int and (value != int(value) or value < 1):
        return None
    return kind(value)
