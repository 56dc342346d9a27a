"""What ``perfkit diagnose`` (and ``perfkit profile``, after the run) prints: the verdict, its three numbers, the
fix, the steps, the command that shows more, the warnings."""
from __future__ import annotations

from ...analysis.step.diagnosis import Diagnosis

MAX_STEP_ROWS = 8  # steps listed on the one screen; --json lists them all


def diagnosis_text(d: Diagnosis) -> str:
    """The one screen of a ``diagnose`` result: verdict, its three numbers, the fix, the steps (up to
    ``MAX_STEP_ROWS``), the command that shows more and the warnings."""
    lines = [f"verdict   {d.title}"] + [f"          - {n['text']}" for n in d.numbers]
    lines.append(f"fix       {d.fix}")
    steps = d.steps
    if len(steps) > 1:
        shown, many = steps.head(MAX_STEP_ROWS), steps["rank"].nunique() > 1
        more = f"; ... {len(steps) - len(shown)} more" if len(steps) > len(shown) else ""
        lines.append("steps     " + "; ".join(
            f"{f'rank {r.rank} ' if many else ''}step {r.step}: {r.verdict} {r.wall_us / 1e3:,.2f} ms"
            for r in shown.itertuples()) + more)
    lines.append(f"more      {d.command}")
    lines += [f"warning   {w}" for w in d.warnings]
    return "\n".join(lines) + "\n"
