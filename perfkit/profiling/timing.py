"""How far the step times of a ``perfkit profile`` run can be trusted: the profiler's overhead (profiled
steps against wait steps), the spread of the recorded steps, and how busy the machine was.

Times are in seconds, one per step boundary the recorder saw (None where a step has no time on that
clock). A figure is *measurable* only when it stands out of the noise: on a loaded 2-core machine one
tiny CPU step read 1.4 ms and the next 508 ms, and the overhead +861% then +2169% on two runs.
"""
from __future__ import annotations

import statistics

from ..cpus import available_cores, load_average
from ..cpus import busy as cpus_busy

OVERHEAD_WARN_PCT = 10.0  # the bar: above it the recorded steps are noticeably slower than real ones
MIN_SIDE = 2  # timed steps each side of the overhead comparison needs (one step is no median)
# Recorded steps whose spread (half their range over their median) exceeds this are noise for per-step
# figures: pyperf's instability bar (it warns when the standard deviation exceeds 10% of the mean).
STEADY_SPREAD_PCT = 10.0
# Fewer recorded steps than this cannot rank causes whose share moves between steps: five 3-step profiles of
# one script put the DataLoader at 27%, 10%, 8%, 20% and 14% of the step (4% unprofiled; issue 53).
RANK_STEPS = 10


def overhead_pct(step_times_s, wait: int, warmup: int, active: int) -> float | None:
    """Profiler overhead in percent: the median profiled step (warm-up and active steps after the first,
    whose time holds the profiler's start on the GPU's clock) over the median wait step after the first
    (start-up), minus 1. None when either side has fewer than ``MIN_SIDE`` timed steps (None entries are
    steps without a time)."""
    off, on = _overhead_sides(step_times_s, wait, warmup, active)
    if len(off) < MIN_SIDE or len(on) < MIN_SIDE or statistics.median(off) <= 0:
        return None
    return (statistics.median(on) / statistics.median(off) - 1.0) * 100.0


def overhead_noise_pct(step_times_s, wait: int, warmup: int = 0, active: int = 0) -> float | None:
    """How much the steps of the overhead comparison vary: the larger :func:`spread_pct` of the wait steps
    (after the first) and of the profiled ones (a side with fewer than ``MIN_SIDE`` left out). An overhead
    no larger than this is not measurable with these steps. None when neither side has ``MIN_SIDE``."""
    spreads = [spread_pct(side) for side in _overhead_sides(step_times_s, wait, warmup, active)]
    known = [s for s in spreads if s is not None]
    return max(known) if known else None


def spread_pct(times) -> float | None:
    """Half the range of ``times`` (None entries left out) in percent of their median; None with fewer
    than ``MIN_SIDE`` or a median of 0."""
    timed = [t for t in times if t is not None]
    if len(timed) < MIN_SIDE or statistics.median(timed) <= 0:
        return None
    return (max(timed) - min(timed)) / 2 / statistics.median(timed) * 100.0


def _overhead_sides(step_times_s, wait: int, warmup: int, active: int) -> tuple[list, list]:
    off = [t for t in step_times_s[1:wait] if t is not None]
    on = [t for t in step_times_s[wait + 1:wait + warmup + active] if t is not None]
    return off, on


def step_clock(recorder) -> tuple[list, str]:
    """The step times to measure the overhead on, and their clock: the GPU's (CUDA events) when every
    step the comparison reads has one, else the host's."""
    s = recorder.schedule
    device = recorder.device_step_times_s()
    needed = device[1:s["wait"] + s["warmup"] + s["active"]]
    if needed and all(t is not None for t in needed):
        return device, "GPU"
    return recorder.step_times_s, "host"


def machine_load() -> tuple[float, int] | None:
    """(load average over the last minute, CPUs this process may run on), None where the system has no
    load average (Windows)."""
    load = load_average()
    return None if load is None else (load, available_cores())


def busy(load: tuple[float, int] | None) -> bool:
    """More runnable tasks than CPUs over the last minute: steps waited for a CPU (``cpus.busy``)."""
    return load is not None and cpus_busy(*load)


def overhead_unmeasurable(step_times_s, wait: int, warmup: int, active: int,
                          load: tuple[float, int] | None = None) -> str:
    """Why :func:`overhead_pct` of these steps is not a measurement, "" when it is: too few steps, a busy
    machine (``load``, :func:`machine_load`), profiled steps whose times overlap those of the steps without
    the profiler (neither side all slower), or a difference within :func:`overhead_noise_pct`."""
    pct = overhead_pct(step_times_s, wait, warmup, active)
    if pct is None:
        return "not measured (needs 3+ wait steps and 3+ warm-up and active steps)"
    if busy(load):
        return f"not measurable: the machine was busy (load average {load[0]:.1f} on {load[1]} CPUs)"
    off, on = _overhead_sides(step_times_s, wait, warmup, active)
    if min(on) <= max(off) and max(on) >= min(off):
        return (f"not measurable: the steps with the profiler ({_ms_range(on)}) and without it ({_ms_range(off)}) "
                "overlap")
    noise = overhead_noise_pct(step_times_s, wait, warmup, active)
    if noise is not None and abs(pct) <= noise:
        return f"not measurable: the steps varied by +/-{noise:.0f}%, as much as the profiler's cost"
    return ""


def _ms_range(times: list) -> str:
    return f"{min(times) * 1e3:,.3g} to {max(times) * 1e3:,.3g} ms"


def overhead_warnings(pct: float | None, wait: int, noise_pct: float | None = None,
                      load: tuple[float, int] | None = None, unmeasurable: str = "") -> list[str]:
    """What the measured profiler overhead (``overhead_pct``) means: one within the steps' own spread
    (``noise_pct``), taken on a busy machine (``load``) or otherwise not measurable (``unmeasurable``, from
    :func:`overhead_unmeasurable`) is said to be so; a cost over ``OVERHEAD_WARN_PCT`` overstates host work;
    a figure that far below zero is noise (the steps without the profiler varied more than its cost), not a
    speed-up."""
    if pct is None or abs(pct) <= OVERHEAD_WARN_PCT:
        return []
    if busy(load):
        return []  # noise_warnings says the machine was busy, which covers this figure too
    if unmeasurable and not (noise_pct is not None and abs(pct) <= noise_pct):
        return [f"the profiler's overhead is {unmeasurable}; raise --wait and --active for a steadier comparison"]
    if noise_pct is not None and abs(pct) <= noise_pct:
        return [f"the profiler's overhead is not measurable: the steps varied by +/-{noise_pct:.0f}% "
                f"({max(wait - 1, 0)} without the profiler, the profiled ones after the first); raise --wait and "
                "--active for a steadier comparison"]
    if pct > 0:
        return [f"the profiler made steps {pct:.0f}% slower (over {OVERHEAD_WARN_PCT:.0f}%): times in the "
                "trace overstate host work; Python-heavy steps pay most for with_stack"]
    return [f"the profiler's overhead could not be measured ({pct:.0f}%: steps without the profiler varied more "
            f"than its cost over {max(wait - 1, 0)} of them); raise --wait for a steadier baseline"]


def noise_warnings(active_s, load: tuple[float, int] | None, clock: str = "host", active: int = 0) -> list[str]:
    """Warnings when the recorded (active) steps' times ``active_s`` spread over ``STEADY_SPREAD_PCT`` or
    the machine was busy (``load``, :func:`machine_load`): the per-step figures are then noise. ``active``:
    the ``--active`` asked for; the advice names a larger count (:func:`more_active`), or says why more
    steps will not help (a busy machine)."""
    out = []
    spread = spread_pct(active_s)
    if spread is not None and spread > STEADY_SPREAD_PCT:
        timed = [t for t in active_s if t is not None]
        out.append(f"the {len(timed)} recorded steps took {min(timed) * 1e3:,.3g} to {max(timed) * 1e3:,.3g} ms "
                   f"({clock} clock; median {statistics.median(timed) * 1e3:,.3g} ms, spread +/-{spread:.0f}%, over "
                   f"the {STEADY_SPREAD_PCT:.0f}% pyperf calls unstable): per-step figures and the verdict may "
                   f"read noise; {_more_steps_text(len(timed), active, busy(load))}")
    if busy(load):
        out.append(f"the machine was busy while profiling (load average {load[0]:.1f} over the last minute on "
                   f"{load[1]} CPU{'s' if load[1] != 1 else ''}): steps waited for a CPU, so step times and the "
                   "profiler's overhead are not measurable; profile on an idle machine")
    return out


def more_active(recorded: int, active: int = 0) -> int:
    """The ``--active`` to suggest after ``recorded`` steps of an ``--active active`` run: at least
    ``RANK_STEPS``, and twice what was asked (never the same count again)."""
    return max(RANK_STEPS, 2 * max(recorded, active))


def few_steps_text(recorded: int, active: int = 0) -> str:
    """Why ``recorded`` steps (under ``RANK_STEPS``) cannot rank causes even when their times are steady, with
    the ``--active`` to ask for; "" from ``RANK_STEPS`` steps on, or when nothing was recorded."""
    if not 0 < recorded < RANK_STEPS:
        return ""
    return (f"too few to rank causes whose share moves between steps (under {RANK_STEPS}): "
            f"--active {more_active(recorded, active)} for a ranking")


def _more_steps_text(recorded: int, active: int, busy_machine: bool) -> str:
    if busy_machine:  # more steps of a loaded machine only sample its load longer
        return "recording more steps will not steady them while the machine is busy: profile on an idle machine"
    few = (f"{recorded} steps are too few to rank causes whose share moves this much between steps "
           f"(under {RANK_STEPS}); " if recorded < RANK_STEPS else "")
    return f"{few}record more steps (--active {more_active(recorded, active)}) on an idle machine"
