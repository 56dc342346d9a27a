import json
import re

import pytest

from perfkit.report import html as h
from perfkit.report.index import build_index, headline, scan_reports
from perfkit.report.perflog import PerfLog
from perfkit.report.runner import RUN_RECORD_VERSION

HOSTILE = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(1)>"  # no "/" so it can be a file name


def _report(root, day, name, status=None, error=""):
    folder = root / day
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.html").write_text("<html></html>")
    if status:
        record = {"format_version": RUN_RECORD_VERSION, "status": status, "error": error}
        (folder / f"{name}.run.json").write_text(json.dumps(record))


@pytest.fixture
def reports(tmp_path):
    root = tmp_path / "reports"
    _report(root, "2024-01-01", "cpu_bound", "ok")
    _report(root, "2024-02-01", "cpu_bound", "ok")
    _report(root, "2024-02-01", "amp_regression", "failed", error=f"ValueError: {HOSTILE}")
    _report(root, "2024-02-01", HOSTILE_FILE, "ok")
    _report(root, "scratch", "not_a_report", "ok")  # not a dated folder: ignored
    log = PerfLog(root / "perf_log.csv")
    log.append(date="2024-01-01", run_id="2024-01-01/cpu_bound", investigation="cpu_bound",
               metric="step_ms", value=10.0, unit="ms", device="cpu")
    log.append(date="2024-02-01", run_id="2024-02-01/cpu_bound", investigation="cpu_bound",
               metric="step_ms", value=13.0, unit="ms", device="cpu", change=HOSTILE)
    log.append(date="2024-02-01", run_id="2024-02-01/cpu_bound", investigation="cpu_bound",
               metric=HOSTILE, value=2.0, unit="ms", device="cpu")
    # No run_id: matched to its report by date + investigation.
    log.append(date="2024-02-01", investigation="amp_regression", metric="tput", value=50.0,
               unit="samples/s", device="cpu")
    return root


def test_index_lists_dated_reports_newest_first_with_status_and_headlines(reports):
    path = build_index(reports)
    page = path.read_text()
    assert path == reports / "index.html"
    assert page.index("<h3>2024-02-01</h3>") < page.index("<h3>2024-01-01</h3>")
    assert '<a href="2024-02-01/cpu_bound.html">cpu_bound</a>' in page
    assert '<a href="2024-01-01/cpu_bound.html">cpu_bound</a>' in page
    assert "not_a_report" not in page
    assert "<tr class=\"failed\"><td><a href=\"2024-02-01/amp_regression.html\">" in page
    assert "step_ms = 13 ms (+30.0%, regressed)" in page
    assert "step_ms = 10 ms (no baseline)" in page
    assert "tput = 50 samples/s (no baseline)" in page


def test_index_perf_log_table_and_trend_plots(reports):
    page = build_index(reports).read_text()
    assert page.count("<strong class='verdict-regressed'>REGRESSED</strong>") == 1
    assert page.count('<tr class="regressed">') == 1
    # One trend per investigation + metric + unit + device, inline PNG.
    trends = re.findall(r"<div class='trend'><img src=\"data:image/png;base64,[A-Za-z0-9+/=]+\" alt=\"([^\"]*)\"", page)
    assert sorted(trends) == sorted([
        "amp_regression: tput (cpu)", "cpu_bound: step_ms (cpu)", "cpu_bound: &lt;script&gt;alert(1)&lt;/script&gt; (cpu)",
    ])


def test_index_escapes_hostile_names_everywhere(reports):
    page = build_index(reports).read_text()
    assert "<script" not in page and "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # change, metric, error, headline
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    assert "%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.html" in page  # the link is URL-quoted
    assert ">&lt;img src=x onerror=alert(1)&gt;</a>" in page


def test_index_builds_without_a_log_and_reports_a_corrupt_one(tmp_path):
    root = tmp_path / "reports"
    _report(root, "2024-03-03", "htod", "ok")
    page = build_index(root).read_text()
    assert "2024-03-03/htod.html" in page and "no rows yet" in page and "Trends" not in page
    (root / "perf_log.csv").write_text("not,a,perf,log\n1,2,3,4\n")
    page = build_index(root).read_text()
    assert "perf log unreadable, not shown" in page and "perf_log.csv:1" in page
    assert "2024-03-03/htod.html" in page


def test_empty_reports_dir(tmp_path):
    page = build_index(tmp_path / "new").read_text()
    assert "No dated reports yet" in page and page.startswith("<!DOCTYPE html>")


def test_status_falls_back_to_papermill_metadata(tmp_path):
    _report(tmp_path, "2024-04-04", "old_failed")
    _report(tmp_path, "2024-04-04", "no_notebook")
    nb = {"cells": [], "metadata": {"papermill": {"exception": True}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "2024-04-04" / "old_failed.ipynb").write_text(json.dumps(nb))
    entries = {e.name: e.status for e in scan_reports(tmp_path, PerfLog(tmp_path / "x.csv").read(missing_ok=True))}
    assert entries == {"old_failed": "failed", "no_notebook": "unknown"}


def test_headline_prefers_run_id_and_keeps_the_last_value_per_metric(tmp_path):
    log = PerfLog(tmp_path / "log.csv")
    log.append(date="2024-05-05", run_id="2024-05-05/a", investigation="a", metric="m", value=1.0)
    log.append(date="2024-05-05", run_id="2024-05-05/a", investigation="a", metric="m", value=1.5)
    log.append(date="2024-05-05", run_id="other", investigation="a", metric="m", value=9.0)
    frame = log.read()
    assert headline(frame, "2024-05-05", "a") == ("m = 1.5 (+50.0%, regressed)",)
    assert headline(frame, "2024-05-06", "a") == ()


def test_html_helpers_escape_and_refuse_script_urls():
    assert h.link("javascript:alert(1)", "x") == "x"
    assert h.link("https://example.com", "<b>") == "&lt;b&gt;"
    assert h.link('2024-01-01/a"b.html', "a") == '<a href="2024-01-01/a%22b.html">a</a>'
    assert h.esc(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    page = h.page(HOSTILE, "<p>body</p>")
    assert "<script" not in page and page.count("&lt;script&gt;") == 2
    assert h.png_img(b"\x89PNG", alt='"x"').startswith('<img src="data:image/png;base64,iVBORw==" alt="&quot;x&quot;"')
