"""``diagnose(trace)``: the one verdict of a trace, the numbers behind it, the fix, and what was set apart.

Every surface that names what limits a step (``perfkit diagnose``, ``summary``, ``cpu_bound``,
``step_anatomy``, ``critical-path``, the report cards and the index line) reads it from here, so two
reports of one trace cannot disagree. The verdict is ``cpu_bound``'s: per full step window, the
rules of ``rules.decide`` (taxonomy, thresholds and their sources are there) over the
layers of ``layers.step_layers``; the overall verdict applies the same rules to the sums over the full steps.

Set apart from the verdict:

* **warm-up** (``warmup.py``): first calls far longer than the same call later, taken out of every
  share (a step that is almost all warm-up is "warm-up");
* **outside the profiled steps**: host work, syncs and copies before the first or after the last
  step window (``outside_steps``), never in a per-step figure or in-step advice;
* **partial steps** at the profiler window's edges (``trace.steps.stub_steps``), with a warning.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import PerfkitError
from ...results import html_section, html_table, html_text, html_warnings
from ...text import jsonable
from ...trace import intervals
from ..host_ops import HOST_WORK_CATEGORIES
from ..gpu_kernels import gpu_bound_findings
from ..sync_points.find import syncs
from .cpu_bound import cpu_bound, overall_numbers
from .findings import copy_bound
from .host_work import top_host_work
from .hotspots import hotspots
from .queued import host_ahead
from .rules import SECOND_CAUSE_SHARE, SYNCS_BEFORE_GRAPHS, launch_bound, sync_cost
from .warmup import warmup_count_text, warmup_text
from .whatif import whatif

SHARES = ("gpu_busy", "comm_exposed", "dataloader", "compile", "sync", "launch_side", "host_compute", "python",
          "untraced", "warmup")
# The command that shows more, per verdict ({trace} is the trace's path).
MORE = {
    "GPU-bound": "perfkit gpu-kernels {trace}", "communication-bound": "perfkit ranks <folder of every rank's trace>",
    "input-bound": "perfkit gaps {trace}", "GPU-bound (host ahead)": "perfkit gaps {trace}",
    "sync-bound": "perfkit sync-points {trace}", "launch-bound": "perfkit hotspots {trace}",
    "host-compute-bound": "perfkit hotspots {trace}", "CPU-only trace": "perfkit hotspots {trace}",
    "compiling": "perfkit run step_anatomy -p trace_path {trace}", "warm-up": "perfkit critical-path {trace}",
    "GPU activity not recorded": "perfkit summary {trace}", "host activity not recorded": "perfkit summary {trace}",
}


@dataclass(frozen=True, eq=False, repr=False)
class Diagnosis:
    """``verdict`` and ``title`` (the verdict with its deciding number), ``numbers``: the three
    figures behind it (``label``, ``value``, ``unit``, ``text``), ``fix``, ``steps``: one row per
    full step (``rank``, ``step``, ``verdict``, ``wall_us`` and a ``<share>_share`` column per
    ``SHARES``), ``warm_up``: the warm-up calls, ``outside_steps``: what ran outside the step
    windows, ``command``: the command that shows more, ``findings`` (cpu_bound's, ranked),
    ``warnings``."""

    verdict: str
    title: str
    numbers: tuple
    fix: str
    steps: pd.DataFrame
    warm_up: pd.DataFrame
    outside_steps: dict
    command: str
    findings: tuple
    warnings: tuple
    prediction: dict = None
    decided_by: str = "shares"

    def to_json(self) -> dict:
        steps = [{"rank": int(r["rank"]), "step": int(r["step"]), "verdict": r["verdict"], "wall_us": r["wall_us"],
                  "shares": {k: r[f"{k}_share"] for k in SHARES}} for r in self.steps.to_dict("records")]
        warm = [{"name": r["name"], "rank": int(r["rank"]), "ts_us": r["ts_us"], "dur_us": r["dur_us"],
                 "later_median_us": r["later_median_us"]} for r in self.warm_up.to_dict("records")]
        return jsonable({"verdict": self.verdict, "title": self.title, "steps": steps, "decided_by": self.decided_by,
                         "rule": self.rule, "evidence": [dict(n) for n in self.numbers], "fix": self.fix,
                         "prediction": self.prediction, "warm_up": warm,
                         "outside_steps": self.outside_steps, "command": self.command,
                         "findings": [dict(f.__dict__) for f in self.findings[1:]], "warnings": list(self.warnings)})

    @property
    def rule(self) -> str:
        """The rule that decided the verdict (a fix's saving, or a share threshold)."""
        return self.findings[0].threshold if self.findings else ""

    def __repr__(self) -> str:
        return f"<Diagnosis {self.title}>"

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html_text(n['text'])}</li>" for n in self.numbers)
        return html_section(f"Diagnosis: {self.verdict}", f"<p>{html_text(self.title)}</p><ul>{items}</ul>",
                            html_text(f"Fix: {self.fix}"), html_table(self.steps), html_warnings(self.warnings))


def diagnose(trace, *, path: str | None = None, kernel_fix: bool = True) -> Diagnosis:
    """The diagnosis of ``trace`` (module doc). ``path``: how the trace is named in the command that
    shows more (default: its first file). ``kernel_fix``: a GPU-bound verdict's fix is the leading
    ``kernels`` finding, which reads the ops' shapes from the trace file (seconds on millions of
    events); False keeps the generic fix (the verdict is the same). Never raises for traces without
    GPU events, stacks or steps: a trace without steps is judged as one window, with a warning.
    Computed once per trace and arguments (every surface shows it): the result is shared."""
    name = path or (trace.files[0].path if trace.files else "TRACE")
    return trace.derived(("diagnose", name, bool(kernel_fix)), lambda t: _diagnose(t, name, kernel_fix))


def _diagnose(trace, name: str, kernel_fix: bool) -> Diagnosis:
    result = cpu_bound(trace)
    sync = syncs(trace)
    full, verdict_finding, title, numbers = _headline(trace, result, sync)
    fix = verdict_finding.fix
    warnings = list(result.warnings)
    if len(trace.steps) == 0:
        warnings.insert(0, "no profiler steps: the whole trace is judged as one window; record with "
                           "torch.profiler.schedule and call prof.step() once per step for a verdict per step")
    if len(result.warmup):
        warnings.append(f"warm-up left out of the verdict: {warmup_count_text(result.warmup)} held "
                        f"{result.warmup['dur_us'].sum() / 1e3:,.1f} ms ({warmup_text(result.warmup)})")
    outside = outside_steps(trace, sync, result.steps)
    if outside["syncs"]["count"] or outside["host_busy_us"] > 0:
        warnings.append(outside_note(outside))
    if result.verdict == "sync-bound":
        fix = _sync_fix(sync, fix)
    if result.verdict == "GPU-bound" and kernel_fix and not copy_bound(result.steps):
        lead, note = _kernel_lead(trace)
        warnings += note
        if lead is not None:
            fix = f"{lead.title}: {lead.fix}"
            numbers[-1] = {"label": "leading kernel finding", "value": None, "unit": "", "text": lead.title}
    prediction = _prediction(trace, result)
    fix = with_prediction(fix, prediction)
    return Diagnosis(
        verdict=result.verdict, title=title, numbers=tuple(numbers), fix=fix, steps=_step_rows(full), warm_up=result.warmup.reset_index(drop=True),
        outside_steps=outside, command=MORE.get(result.verdict, "perfkit summary {trace}").format(trace=name),
        findings=(verdict_finding,) + tuple(f for f in result.findings if f is not verdict_finding),
        warnings=tuple(dict.fromkeys(warnings)), prediction=prediction,
        decided_by=result.evidence.get("decided_by", "shares"))


def _prediction(trace, result) -> dict:
    """What the top fix buys (``whatif``), or why there is no prediction (a trace the replay cannot run), with
    ``sentence``: how every surface says it ("Predicted: median step 4.10 -> 2.90 ms (1.41x) with the syncs removed")."""
    if result.evidence.get("decided_by") == "replay":
        out = whatif(trace).prediction_json()
    else:
        why = ("no GPU events, so nothing to replay: the verdict comes from the share rules"
               if not trace.has_gpu_events else "no full step to replay: the verdict comes from the share rules")
        out = {"fix": None, "text": f"no prediction: {why}"}
    text = out["text"]
    return dict(out, sentence=f"Predicted: {text}" if out["fix"] else f"{text[0].upper()}{text[1:]}")


def with_prediction(fix: str, prediction: dict) -> str:
    """The fix and what it buys: "... Predicted: median step 4.10 -> 2.90 ms (1.41x) with the syncs removed."."""
    return f"{fix.rstrip()} {prediction['sentence']}."


def verdict_line(trace) -> dict:
    """``verdict``, ``title`` and ``fix`` of ``diagnose(trace, kernel_fix=False)``, without what only
    the whole diagnosis shows (sync points and host work outside the steps, warnings), and ``steps``:
    ``{(rank, step): verdict}``: for a command that prints the verdict beside its own table
    (``perfkit critical-path``)."""
    result = cpu_bound(trace)
    sync = syncs(trace)
    _, finding, title, _ = _headline(trace, result, sync)
    fix = _sync_fix(sync, finding.fix) if result.verdict == "sync-bound" else finding.fix
    fix = with_prediction(fix, _prediction(trace, result))
    steps = {(int(r), int(s)): v for r, s, v in zip(result.steps["rank"], result.steps["step"], result.steps["verdict"])}
    return {"verdict": result.verdict, "title": title, "fix": fix, "steps": steps}


def _headline(trace, result, sync) -> tuple:
    """(full steps, the verdict's finding, title, the three numbers) of ``cpu_bound``'s ``result``:
    the title of a host-compute-bound verdict carried by Python names where that time goes, and every title
    by the cause behind the verdict (``second_cause``; ``sync``: ``syncs(trace)``)."""
    full = result.full_steps
    o = overall_numbers(full if len(full) else result.steps, result.launches)
    finding = next((f for f in result.findings if f.title.startswith(result.verdict)), result.findings[0])
    title, numbers = finding.title, _numbers(result.verdict, result.evidence, o, result)
    if result.verdict == "host-compute-bound" and numbers[0]["label"].startswith("Python"):
        where = _top_python(trace)
        if where:
            numbers[0] = dict(numbers[0], text=f"{numbers[0]['text']}; most in {where}")
            title = f"{title}; most in {where}"
    also = second_cause(result.verdict, result.evidence, sync)
    return full, finding, f"{title}; also: {also}" if also else title, numbers


def _top_python(trace) -> str:
    """"function (file:line)" of the main thread's Python function with the most self time in the
    steps (``hotspots``, waiting primitives left out), "" when there is none."""
    rows = hotspots(trace).top(1, waiting=False)
    if rows.empty:
        return ""
    r = rows.iloc[0]
    return f"{r['function']} ({r['file']}:{r['line']})" if r["file"] else str(r["function"])


def second_cause(verdict: str, e: dict, sync) -> str:
    """The cause behind the verdict, when one holds ``SECOND_CAUSE_SHARE`` of the step or more ("" else): the
    largest of the others (syncs by what removing them could save, ``rules.sync_cost``). A launch-bound step
    with ``SYNCS_BEFORE_GRAPHS`` GPU-confirmed syncs per step or more names them whatever their share: a CUDA
    graph, its fix, captures only the work between two syncs, and once launches are cheap they hold the step."""
    total = sync.total
    steps = max(total["steps"], 1)
    syncs = (f"{total['in_steps']['count'] / steps:,.0f} sync point(s) per step, "
             f"{total['in_steps']['blocked_us'] / steps / 1e3:,.2f} ms blocked each step")
    if verdict == "launch-bound" and total["in_steps"]["count"] >= SYNCS_BEFORE_GRAPHS * steps and total["gpu_confirmed"]:
        return f"{syncs}: a CUDA graph captures only the work between two syncs, so move them out first (perfkit sync-points)"
    shares = {"sync-bound": (sync_cost(e), syncs),
              "input-bound": (e["dataloader_idle_share"], f"DataLoader {e['dataloader_idle_share']:.0%} of the step "
                                                          "with the GPU idle"),
              "launch-bound": (e["issuing_idle_share"] if launch_bound(e) else 0.0,
                               f"the host issuing launches {e['issuing_idle_share']:.0%} of the step with the GPU idle"),
              "host-compute-bound": (e["own_work_idle_share"], f"the host's own work {e['own_work_idle_share']:.0%} "
                                                               "of the step with the GPU idle"),
              "communication-bound": (e["comm_exposed_share"], f"collectives not under compute "
                                                               f"{e['comm_exposed_share']:.0%} of the step")}
    others = {k: v for k, v in shares.items() if k != verdict and np.isfinite(v[0]) and v[0] >= SECOND_CAUSE_SHARE}
    if not others or verdict in ("warm-up", "GPU activity not recorded", "host activity not recorded", "CPU-only trace"):
        return ""
    return max(others.values(), key=lambda v: v[0])[1]


def _sync_fix(sync, generic: str) -> str:
    """A sync-bound verdict's fix: that of the sync site blocking longest in the steps (a pageable copy is
    pinned, an ``.item()`` is kept on the GPU), with where it is; ``generic`` when no site is confirmed."""
    lead = next((f for f in sync.findings if f.severity != "info" and not f.title.startswith("possible ")), None)
    return generic if lead is None else f"{lead.fix} Largest: {lead.title}."


def _kernel_lead(trace) -> tuple:
    """The leading finding of ``kernels`` (the GPU-bound verdict's fix: what the GPU's time is spent
    on), and warnings; (None, ...) when nothing stands out or the shapes cannot be read."""
    try:
        found = gpu_bound_findings(trace)
    except PerfkitError as exc:
        return None, [f"kernel findings unavailable: {exc}"]
    return (found[0] if found else None), []


def _step_rows(steps: pd.DataFrame) -> pd.DataFrame:
    rows = steps[["rank", "step", "verdict", "wall_us"]].copy()
    wall = (steps["wall_us"] - steps["warmup_us"]).where(lambda w: w > 0)
    for k in SHARES:
        base = steps["wall_us"] if k == "warmup" else wall
        part = steps[f"{k}_us"] - steps[f"{k}_warmup_us"] if f"{k}_warmup_us" in steps else steps[f"{k}_us"]
        rows[f"{k}_share"] = (part / base.where(base > 0)).to_numpy()
    return rows.reset_index(drop=True)


def _numbers(verdict: str, e: dict, o: dict, result) -> list[dict]:
    """The three figures behind ``verdict``, most telling first."""
    n = max(o["steps"], 1)
    ahead = host_ahead(result.full_steps)
    queued = f"; each queued {ahead[0] / 1e3:,.2f} ms of GPU work (the host ran ahead)" if ahead else ""
    step = {"label": "mean step", "value": o["wall_us"] / n / 1e3, "unit": "ms",
            "text": f"mean step {o['wall_us'] / n / 1e3:,.2f} ms over {o['steps']} full step(s){queued}"}
    busy = {"label": "GPU busy", "value": o["gpu_busy_pct"], "unit": "%",
            "text": f"GPU busy {o['gpu_busy_pct']:.0f}% of the step"}

    def share(label: str, key: str) -> dict:
        value = 100 * (e.get(f"{key}_share") or 0.0)
        return {"label": label, "value": value, "unit": "%", "text": f"{label} {value:.0f}% of the step"}

    launches = {"label": "launches per step", "value": e["launches_per_step"], "unit": "",
                "text": f"{e['launches_per_step']:,.0f} kernel launches per step"}
    if verdict == "launch-bound":
        kernel = {"label": "median kernel", "value": e["median_kernel_us"], "unit": "us",
                  "text": f"median kernel {e['median_kernel_us']:,.1f} us"}
        return [launches, kernel, share("host issuing GPU work while the GPU idles", "issuing_idle")]
    if verdict in ("host-compute-bound", "CPU-only trace"):
        top = top_host_work({"host_ops": result.host_ops}, o)
        first = {"label": top["what"], "value": 100 * top["share"], "unit": "%",
                 "text": f"{top['what']} {100 * top['share']:.0f}% of the step"}
        return [first, busy if verdict != "CPU-only trace" else step, launches if verdict != "CPU-only trace"
                else share("host busy", "host_busy")]
    if verdict == "communication-bound":
        return [share("collectives not under compute", "comm_exposed"), busy, step]
    if verdict == "sync-bound":
        return [share("host blocked in syncs", "sync"), busy, step]
    if verdict == "input-bound":
        return [share("DataLoader", "dataloader"), busy, step]
    if verdict == "compiling":
        return [share("compiling", "compile"), {"label": "compile time", "value": o["compile_us"] / 1e6, "unit": "s",
                                                "text": f"{o['compile_us'] / 1e6:,.2f} s compiling"}, step]
    if verdict == "warm-up":
        return [{"label": "warm-up", "value": 100 * e["warmup_share"], "unit": "%",
                 "text": f"warm-up holds {100 * e['warmup_share']:.0f}% of the window"},
                {"label": "warm-up time", "value": o["warmup_us"] / 1e3, "unit": "ms",
                 "text": f"{o['warmup_us'] / 1e3:,.1f} ms in {warmup_count_text(result.warmup)}"}, step]
    if verdict == "GPU-bound (host ahead)":
        return [{"label": "launch-to-kernel delay", "value": e["queue_delay_us"] / 1e3, "unit": "ms",
                 "text": f"kernels start a median {e['queue_delay_us'] / 1e3:,.1f} ms after their launch"}, busy, step]
    if verdict == "host activity not recorded":
        return [{"label": "host events", "value": 0, "unit": "", "text": "0 host events recorded"}, busy,
                {"label": "kernels", "value": o["kernels"], "unit": "", "text": f"{int(o['kernels']):,} kernels recorded"}]
    if verdict == "GPU activity not recorded":
        return [launches, {"label": "kernels recorded", "value": 0, "unit": "", "text": "0 kernels recorded"},
                {"label": "GPUs listed", "value": len(result.devices), "unit": "",
                 "text": f"{len(result.devices)} GPU(s) in deviceProperties"}]
    return [busy, step, share("collectives not under compute", "comm_exposed")]


def outside_steps(trace, sync, windows: pd.DataFrame) -> dict:
    """What ran outside every step window: time before the first and after the last window
    (``before_us``, ``after_us``, summed over ranks), host work there (``host_busy_us``, union), sync
    points (``syncs``: count, blocked_us, from ``sync``, the trace's ``syncs``) and GPU copies
    (``copies``: count, bytes). ``windows``: ``cpu_bound``'s steps, one row per window."""
    ev = trace.events
    out = {"before_us": 0.0, "after_us": 0.0, "host_busy_us": 0.0, "syncs": {"count": 0, "blocked_us": 0.0},
           "copies": {"count": 0, "bytes": 0}}
    if windows.empty or len(trace.steps) == 0:
        return out
    points = sync.sync_points
    keys = set(zip(windows["rank"].astype(int), windows["step"].astype(int)))
    outside = np.array([(int(r), int(s)) not in keys for r, s in zip(points["rank"], points["step"])], dtype=bool)
    out["syncs"] = {"count": int(outside.sum()), "blocked_us": float(points.loc[outside, "blocked_us"].sum())}
    complete = (ev["ph"] == "X").to_numpy()
    host = complete & ev["cat"].isin(HOST_WORK_CATEGORIES).to_numpy()
    copies = complete & (ev["cat"] == "gpu_memcpy").to_numpy()
    for rank, win in windows.groupby("rank"):
        first, last = float(win["start_us"].min()), float(win["end_us"].max())
        mine = (ev["rank"] == rank).to_numpy()
        ts = ev["ts_us"].to_numpy(dtype=np.float64)
        end = ts + ev["dur_us"].to_numpy(dtype=np.float64)
        span = mine & complete
        if span.any():
            out["before_us"] += max(first - float(ts[span].min()), 0.0)
            out["after_us"] += max(float(end[span].max()) - last, 0.0)
        away = (end <= first) | (ts >= last)
        h = mine & host & away
        out["host_busy_us"] += intervals.length(ts[h], end[h])
        c = mine & copies & away
        out["copies"]["count"] += int(c.sum())
        out["copies"]["bytes"] += int(np.nansum(ev["bytes"].to_numpy(dtype=np.float64)[c].clip(min=0)))
    return out


def outside_note(outside: dict) -> str:
    """One line on the work outside the profiled steps."""
    s = outside["syncs"]
    syncs_text = f", {s['count']:,} sync point(s) blocking {s['blocked_us'] / 1e3:,.2f} ms" if s["count"] else ""
    return (f"outside the profiled steps: {outside['host_busy_us'] / 1e3:,.2f} ms of host work{syncs_text} "
            "(before the first or after the last step): not in the per-step figures or the verdict")
