"""The validation investigation as a report shows it: perf-log rows and the prose of a validation run."""
from __future__ import annotations

from ..stats import exact
from .rows import row


def validation_rows(report) -> list[dict]:
    """1 (pass) or 0 (fail or error) per check of a ``ValidationReport`` that has an
    expectation on this device (exact), so a check that stops passing is flagged "regressed";
    skipped, measured and inconclusive checks are not logged."""
    device = report.environment["gpu"] if report.device.startswith("cuda") else "cpu"
    subject = f"validate preset={report.preset}"
    return [row("validation", f"{c.name}_pass", 1.0 if c.status == "pass" else 0.0, "flag", subject=subject,
                device=device, higher_is_better=True, ci=exact(1.0 if c.status == "pass" else 0.0))
            for c in report.checks if c.status in ("pass", "fail", "error")]


def validation_text(report) -> str:
    failed = ", ".join(c.name for c in report.failed)
    noisy = ", ".join(c.name for c in report.checks if c.status == "inconclusive")
    verdict = (f"Failed: {failed}." if failed else
               f"No check failed; timing noise left {noisy} inconclusive: rerun on an idle machine." if noisy else
               "Every check with an expectation on this device passed.")
    return (f"{len(report.checks)} checks on {report.environment['gpu']} ({report.device}, {report.preset} sizes) "
            f"in {report.elapsed_s:.0f} s: {report.counts_text()}. {verdict}")
