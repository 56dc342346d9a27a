import json
import re

import pytest

from perfkit.report.card import MIME, VerdictCard, Number, read_card
from perfkit.report.perflog import PerfLog
from perfkit.report.publish.index import SUBJECT_CHARS, ReportEntry, build_index, log_table, scan_reports
from perfkit.report.publish.records import RUN_RECORD_VERSION

HOSTILE = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(1)>"  # no "/" so it can be a file name


def _card(name, verdict):
    return VerdictCard(name, verdict, (Number("median step", 12.5, "ms", "within noise", 3.0),), "use pinned memory",
                       "trace t.json.gz", "NVIDIA H100").to_json()


def _report(root, run, name, status=None, error="", card=None):
    folder = root / run
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.html").write_text("<html></html>")
    if status:
        record = {"format_version": RUN_RECORD_VERSION, "status": status, "error": error, "card": card or {}}
        (folder / f"{name}.run.json").write_text(json.dumps(record))


def _log(root, *runs):
    log = PerfLog(root / "perf_log.csv")
    for run_id, value in runs:
        log.append(run_id=run_id, investigation="cpu_bound", subject="trace t", metric="step_ms", value=value,
                   unit="ms", device="cpu", ci_low=value * 0.99, ci_high=value * 1.01)
    return log


def test_index_leads_with_one_verdict_line_per_report_of_the_latest_run(tmp_path):
    root = tmp_path / "reports"
    _report(root, "2024-01-01/120000", "cpu_bound", "ok", card=_card("cpu_bound", "launch-bound"))
    _report(root, "2024-02-01/090000", "cpu_bound", "ok", card=_card("cpu_bound", "GPU-bound"))
    _report(root, "2024-02-01/090000", "amp_regression", "failed", error=f"ValueError: {HOSTILE}")
    _report(root, "2024-02-01/093000", "htod", "ok", card=_card("htod", "copies are pinned"))
    _report(root, "scratch", "not_a_report", "ok")  # not a dated folder: ignored
    _log(root, ("2024-01-01/120000/cpu_bound", 10.0), ("2024-02-01/090000/cpu_bound", 25.0))
    page = build_index(root).read_text()
    assert page.index("Latest run: 2024-02-01/093000") < page.index("Earlier runs")
    latest = page[page.index("Latest run"):page.index("Earlier runs")]
    # one line per report: investigation, the trace it read, verdict, one number (issue 37)
    assert ('<tr><td><a href="2024-02-01/093000/htod.html">htod</a></td><td title="t.json.gz">t.json.gz</td>'
            '<td title="copies are pinned">copies are pinned</td>'
            '<td title="median step: 12.5 ms">median step: 12.5 ms</td></tr>') in latest
    assert "Fix:" not in latest and "previous run" not in latest
    # the other investigations' latest results are read first too, each from its newest run (issue 23)
    assert ('<a href="2024-02-01/090000/cpu_bound.html">cpu_bound</a> <span class="run muted">(2024-02-01/090000)'
            '</span></td><td title="t.json.gz">t.json.gz</td><td title="GPU-bound">GPU-bound</td>') in latest
    assert "2024-02-01/090000/amp_regression.html" in latest and "2024-01-01/120000" not in latest
    assert page.index("<h3>2024-02-01/090000</h3>") < page.index("<h3>2024-01-01/120000</h3>")
    assert "not_a_report" not in page
    assert '<tr class="failed"><td><a href="2024-02-01/090000/amp_regression.html">' in page
    assert page.count('<tr class="regressed">') == 1 and "REGRESSED" in page


def test_trends_only_for_metrics_with_two_runs(tmp_path):
    root = tmp_path / "reports"
    log = _log(root, ("2024-01-01/1/cpu_bound", 10.0), ("2024-01-02/1/cpu_bound", 10.5))
    log.append(run_id="2024-01-02/1/htod", investigation="htod", subject="trace t", metric="once", value=1.0)
    page = build_index(root).read_text()
    alts = re.findall(r"<div class=\"trend\"><img src=\"data:image/png;base64,[A-Za-z0-9+/=]+\" alt=\"([^\"]*)\"",
                      page)
    assert alts == ["cpu_bound: step_ms (cpu)"]
    assert (root / "index.html").stat().st_mode & 0o777 == 0o644


def test_index_escapes_hostile_names_everywhere(tmp_path):
    root = tmp_path / "reports"
    _report(root, "2024-02-01/090000", HOSTILE_FILE, "ok", card=_card(HOSTILE, HOSTILE))
    PerfLog(root / "perf_log.csv").append(investigation="a", metric=HOSTILE, value=1.0, change=HOSTILE, run_id="r")
    page = build_index(root).read_text()
    assert "<script" not in page and "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # verdict (text and hover) and change
    assert "&lt;script&gt;alert(1)&lt;/<wbr>script&gt;" in page  # the metric, breakable after "/"
    assert "%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.html" in page  # the link is URL-quoted


def test_index_builds_without_a_log_and_reports_a_corrupt_one(tmp_path):
    root = tmp_path / "reports"
    _report(root, "2024-03-03/101010", "htod", "ok")
    page = build_index(root).read_text()
    assert "2024-03-03/101010/htod.html" in page and "no rows yet" in page and "Trends" not in page
    (root / "perf_log.csv").write_text("not,a,perf,log\n1,2,3,4\n")
    page = build_index(root).read_text()
    assert "perf log unreadable, not shown" in page and "perf_log.csv:1" in page


def test_empty_reports_dir(tmp_path):
    page = build_index(tmp_path / "new").read_text()
    assert "No reports yet" in page and page.startswith("<!DOCTYPE html>")


def test_status_falls_back_to_papermill_metadata_and_old_layout(tmp_path):
    _report(tmp_path, "2024-04-04", "old_failed")  # the per-day layout of older perfkit
    _report(tmp_path, "2024-04-04", "no_notebook")
    nb = {"cells": [], "metadata": {"papermill": {"exception": True}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "2024-04-04" / "old_failed.ipynb").write_text(json.dumps(nb))
    entries = {e.name: e.status for e in scan_reports(tmp_path)}
    assert entries == {"old_failed": "failed", "no_notebook": "unknown"}


def test_card_round_trips_through_the_notebook_output():
    import nbformat

    card = VerdictCard("cpu_bound", "GPU-bound", (Number("GPU busy", 93.0, "%", "regressed", -12.0),), "",
                       "trace t", "A100")
    bundle = card._repr_mimebundle_()
    assert "<b>GPU-bound</b>" in bundle["text/html"] and "REGRESSED" in bundle["text/html"]
    cell = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("display_data", data=bundle)])
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert read_card(nb)["numbers"][0]["label"] == "GPU busy" and MIME in bundle
    assert card.line() == "GPU-bound. GPU busy: 93 % (-12.0% vs previous run: REGRESSED)."


def _two_runs(root):
    log = PerfLog(root / "perf_log.csv")
    log.append(run_id="2024-01-01/100000/cpu_bound", investigation="cpu_bound", subject="trace t.json.gz",
               metric="median_step_ms", value=12.5, unit="ms", device="cpu")
    log.append(run_id="2024-01-02/100000/cpu_bound", investigation="cpu_bound", subject="trace t.json.gz",
               metric="check_pass", value=1.0, unit="flag", device="cpu")
    return log.read()


def test_log_table_drops_what_repeats_and_reads_flags(tmp_path):
    log = _two_runs(tmp_path)
    shown = log_table(log)
    assert "change" not in shown.columns  # no row says what changed
    assert shown["run"].tolist() == ["2024-01-02/100000", "2024-01-01/100000"]  # newest first, no "/cpu_bound"
    assert shown["subject"].tolist() == ["t.json.gz", "t.json.gz"]
    assert shown["after"].tolist() == ["yes", "12.5 ms"]
    assert "change" in log_table(log.assign(change=["", "bigger batch"])).columns


def test_log_table_fits_a_page_with_notes_clipped_not_hidden(tmp_path):
    root = tmp_path / "reports"
    note = "load average 4.4 on 2 cores while timing: " + "other processes compete for the CPU; " * 8
    PerfLog(root / "perf_log.csv").append(run_id="2024-01-01/100000/amp_regression", investigation="amp_regression",
                                          subject="live mlp", metric="speedup", value=0.59, unit="x", device="cpu",
                                          quality=note)
    page = build_index(root).read_text()
    assert "table-layout: fixed" in page and "overflow-x" not in page  # no sideways scroll hiding verdict and note
    assert "-webkit-line-clamp: 3" in page  # a long note takes 3 lines; the whole of it on hover
    shown = log_table(PerfLog(root / "perf_log.csv").read())["note"].iloc[0]
    assert f'<td class="note" title="{shown}"><div>{shown}</div></td>' in page and shown.startswith("load average")
    assert '<col class="run"><col class="investigation"><col class="subject"><col class="metric">' in page


def test_each_run_of_one_script_shows_its_own_name_in_the_index(tmp_path):
    """Every `perfkit profile` of train_cnn.py writes traces/train_cnn-DATE-HHMMSS.pt.trace.json.gz: cut at the end
    of its cell, each showed as "traces/train_cnn-2026-12-…". The cell shows the end that tells them apart, the
    whole name on hover; a name that fits is shown as it is."""
    root = tmp_path / "reports"
    names = [f"traces/train_cnn-2026-12-02-{t}.pt.trace.json.gz" for t in ("143012", "150233")]
    for run, name in zip(("2026-12-02/143100", "2026-12-02/150300"), names):
        card = VerdictCard("cpu_bound", "CPU-only trace", (), "", f"trace {name}", "cpu").to_json()
        _report(root, run, "cpu_bound", "ok", card=card)
    page = build_index(root).read_text()
    shown = {e.subject: e.shown_subject for e in scan_reports(root)}
    assert shown == {names[0]: "…train_cnn-2026-12-02-143012", names[1]: "…train_cnn-2026-12-02-150233"}
    assert all(f'<td title="{n}">{shown[n]}</td>' in page for n in names)


@pytest.mark.parametrize("subject, shown", [
    ("mlp b64 f32 h128 l2 bfloat16 adam steps=10x20", "mlp b64 f32 h128 l2 bfloat1…"),  # words: what was run
    ("validate preset=quick", "validate preset=quick"),
    ("x" * SUBJECT_CHARS, "x" * SUBJECT_CHARS),
    ("gpu/item_logging.pt.trace.json.gz", "gpu/item_logging"),
    ("traces/ppo_train-2026-12-02-143012.pt.trace.json.gz", "…ppo_train-2026-12-02-143012"),
])
def test_the_subject_cell_keeps_the_part_that_tells_runs_apart(subject, shown):
    assert ReportEntry("2026-12-02/143000", "n", "h", "ok", subject=subject).shown_subject == shown


def test_a_plain_papermill_run_is_indexed_with_the_verdict_its_notebook_displayed(tmp_path):
    """The README's plain-papermill recipe writes no run record: the index read "no verdict recorded" although the
    executed notebook displayed its card. A notebook without a card still says so."""
    import nbformat

    root = tmp_path / "reports"
    for name, card in (("sync_points", _card("sync_points", "3 sync points per step")), ("htod", None)):
        _report(root, "2026-12-02/143000", name)  # no .run.json
        cell = nbformat.v4.new_code_cell("card")
        cell.outputs = [nbformat.v4.new_output("display_data", data={MIME: card} if card else {"text/plain": "x"})]
        nb = nbformat.v4.new_notebook(cells=[cell], metadata={"papermill": {"exception": None}})
        nbformat.write(nb, root / "2026-12-02/143000" / f"{name}.ipynb")
    page = build_index(root).read_text()
    assert '<td title="3 sync points per step">3 sync points per step</td>' in page
    assert page.count("no verdict recorded") == 1
