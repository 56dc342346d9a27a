"""Whether the two sides of a ``diff`` ran under conditions that let their step times be compared.

A step-time verdict is withheld ("inconclusive", with why and what to do) when:

* either trace was recorded on a **busy** machine: ``perfkit profile`` writes the load average and CPUs
  into the trace (``trace.recorded``), judged by the one rule of ``perfkit.cpus.busy``, as the A/B harness
  and the perf log judge theirs;
* a side's step times are **unreliable** by the A/B harness's rule (``perfkit.stats.unreliable``: robust
  CV over 50%, or a median that moves by half between the two halves of the window);
* the CI of the ratio is **too wide** to size the change: its ends more than ``WIDE_CI`` apart.

Said, without withholding the verdict: a faster/slower verdict over a trace that records no load; two
machines **differently loaded** (their load per CPU apart by
``LOAD_GAP`` or more), or run with different CPU or torch thread counts; and a step-time change that lies
mostly **outside every op** on any thread of the process (host stalls: the process waited for a CPU, for
I/O or a lock, or ran Python the profiler did not record), which no op in the tables explains.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...stats import UNRELIABLE_CV, unreliable
from ...trace.intervals import window_cover
from ...trace.names import starts_with
from ...trace.steps import STEP_PREFIX
from ..host_ops import HOST_WORK_CATEGORIES

# A CI whose ends are more than this factor apart cannot tell a 2x win from none (perfkit rule: the
# issue's merged-runs diff gave [0.926, 466]).
WIDE_CI = 2.0
# Load averages per CPU this far apart (half the CPUs) mean the two traces met different competition.
LOAD_GAP = 0.5
# A step-time change at least this share of which lies outside every op is not explained by the ops.
OUTSIDE_SHARE = 0.5
ADVICE = ("re-record both on a quiet machine (no other jobs; `uptime` load average below the CPUs), "
          "with more steps (perfkit profile --active 20)")
COVER_CATEGORIES = (*HOST_WORK_CATEGORIES, "python_function")


def outside_ops_us(trace, windows: pd.DataFrame) -> np.ndarray:
    """Per window of ``windows`` (``step_windows`` rows), the us not covered by any op, runtime call or
    Python frame on any thread of its rank."""
    ev = trace.select(*COVER_CATEGORIES)
    ev = ev[~starts_with(ev["name"], STEP_PREFIX)]
    return np.clip(windows["dur_us"].to_numpy(dtype=float) - window_cover(ev, windows), 0.0, None)


def unreliable_reasons(step_change: dict, steps: tuple, machines: tuple) -> list[str]:
    """Why the step-time comparison supports no verdict ([] when it does). ``steps``: each side's full
    step times (us, in order); ``machines``: each side's ``trace.recorded.Machine``."""
    out = [f"{label} was recorded on a busy machine ({m.text()})" for label, m in zip("AB", machines) if m.busy]
    timing = unreliable(*steps) if min(len(s) for s in steps) >= 2 else ""
    if timing:
        out.append(f"step times vary too much to compare ({timing}; over {UNRELIABLE_CV:.0%} is noise, "
                   "the A/B harness's rule)")
    low, high = step_change["low"], step_change["high"]
    if np.isfinite(low) and np.isfinite(high) and low > 0 and high / low > WIDE_CI:
        out.append(f"the CI [{low:.3g}, {high:.3g}] spans more than {WIDE_CI:g}x")
    return out


def condition_warnings(machines: tuple, step_change: dict, outside: tuple) -> list[str]:
    """Differently loaded machines, and a step change that lies outside every op (``outside``: each
    side's per-step us outside every op, ``outside_ops_us``)."""
    out = _machine_warnings(*machines)
    unknown = [label for label, m in zip("AB", machines) if not m.known]
    if unknown and step_change["verdict"] in ("faster", "slower"):
        out.append(f"{' and '.join(unknown)} record{'s' if len(unknown) == 1 else ''} no machine load: whether "
                   "another process competed for the CPUs is unknown (perfkit profile records it in the trace)")
    if step_change["n_a"] and step_change["n_b"]:
        delta = step_change["median_b_us"] - step_change["median_a_us"]
        moved = float(np.median(outside[1]) - np.median(outside[0])) if all(len(o) for o in outside) else 0.0
        if delta and np.sign(moved) == np.sign(delta) and abs(moved) >= OUTSIDE_SHARE * abs(delta):
            out.append(f"{abs(moved) / 1e3:,.3f} ms of the {abs(delta) / 1e3:,.3f} ms step change is time outside "
                       "every op on every thread (host stalls: waiting for a CPU, I/O or a lock, or Python the "
                       "profiler did not record, with_stack=False): no op explains it; check the machine's load")
    return out


def _machine_warnings(a, b) -> list[str]:
    out = []
    if a.known and b.known and abs(a.per_cpu - b.per_cpu) >= LOAD_GAP:
        out.append(f"A and B ran under different load (A: {a.text()}; B: {b.text()}): other processes "
                   "competed for the CPUs differently, which changes host times on their own")
    if a.cpus and b.cpus and a.cpus != b.cpus:
        out.append(f"A could run on {a.cpus} CPUs and B on {b.cpus}: host times include the difference")
    if a.torch_threads and b.torch_threads and a.torch_threads != b.torch_threads:
        out.append(f"A ran {a.torch_threads} torch threads and B {b.torch_threads}: CPU op times include the "
                   "difference")
    return out


def judged(step_change: dict, reasons: list[str]) -> dict:
    """``step_change`` with its verdict withheld ("inconclusive", ``reason`` saying why and what to do) when
    ``reasons`` say the comparison supports none; "not enough data" stays. ``unreliable``: the reasons, "" if none."""
    why = "; ".join(reasons)
    if not reasons or step_change["verdict"] == "not enough data":
        return dict(step_change, unreliable=why)
    return dict(step_change, verdict="inconclusive", unreliable=why, reason=f"{why}: {ADVICE}")
