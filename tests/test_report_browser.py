"""The headless-Chromium driver of the report's browser test (tests/report_browser.py) on a small page:
console errors and uncaught exceptions are caught, a page's values read, a screenshot taken. The
report itself is opened by tests/test_e2e.py::test_report_in_browser. CI sets PRBENCH_BROWSER_TEST=1
(.ci/run), which turns a missing chromium into a failure; elsewhere these tests skip."""
import os
import re

import pytest
from report_browser import Browser, chromium


@pytest.fixture(scope="module")
def exe():
    path = chromium()
    if path is None:
        if os.environ.get("PRBENCH_BROWSER_TEST") == "1":
            pytest.fail("PRBENCH_BROWSER_TEST=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH (apt-get install chromium; CI sets PRBENCH_BROWSER_TEST=1)")
    return path


def test_console_errors_and_exceptions_are_caught(exe, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body><p id='x'>42</p><script>console.log('fine'); console.error('bad', 7);"
                    "setTimeout(() => { throw new Error('late failure'); }, 10);</script></body></html>")
    b = Browser(exe, width=400, height=300, timeout=30)
    try:
        b.navigate(page.as_uri())
        assert b.evaluate("document.getElementById('x').textContent") == "42"
        b.wait_for("new Promise(r => setTimeout(() => r(true), 50))", "a pause")
        b.screenshot(tmp_path / "shot.png")
        errors = b.errors()
    finally:
        b.close()
    assert errors[0] == "console.error: bad 7"
    assert len(errors) == 2 and errors[1].startswith("uncaught: Error: late failure"), errors
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_clean_page_has_no_errors(exe, tmp_path):
    page = tmp_path / "ok.html"
    page.write_text("<html><body><table class='t'><tr><td>1</td></tr></table></body></html>")
    b = Browser(exe, width=400, height=300, timeout=30)
    try:
        b.navigate(page.as_uri())
        assert b.wait_for("document.querySelectorAll('table.t td').length", "the table") == 1
        assert b.errors() == []
    finally:
        b.close()


def _verdict_fragment() -> str:
    """The landing page's verdict fragment for a decided cell and a "cannot decide" one (no test: p, q,
    interval and the difference do not exist; the baseline's coefficient is undefined)."""
    import numpy as np
    import pandas as pd

    from prbench.analysis.comparison import COMPARISON_COLUMNS
    from prbench.analysis.summary import verdict_html

    cell = dict(policy="p", measure="judge_score", benchmark_b="general", family="confirmatory", ci_level=0.9833)
    rows = [dict(cell, downstream="bon", estimator="expected", k=16.0, n_rms=35, value_a=0.83, value_b=-0.30,
                 diff=1.13, p=4.9e-06, q=1.5e-05, ci_low=0.61, ci_high=1.66, verdict="personalized"),
            dict(cell, downstream="ppo", estimator="", k=np.nan, n_rms=7, value_a=0.46, value_b=np.nan, diff=np.nan,
                 p=np.nan, q=np.nan, ci_low=np.nan, ci_high=np.nan, verdict="cannot decide")]
    return verdict_html(pd.DataFrame(rows).reindex(columns=COMPARISON_COLUMNS), None, 0.05)


def test_verdict_fragment_has_dashes_not_nan():
    frag = _verdict_fragment()
    assert not re.search(r"\bnan\b", frag, re.I)
    assert frag.count("\u2014</td>") == 3  # the undecided cell's difference, q and the baseline's coefficient
    assert "+0.46 / \u2014</td>" in frag and "(98.3%)" in frag  # the interval's level moves to the note


def test_verdict_table_fits_the_report_column(exe, tmp_path):
    """The report's landing-page text column is 512 px wide at a 1400 px window (Snakemake 9's report,
    read by tests/test_e2e.py::test_report_in_browser on the real report); the verdict table fits it
    without a sideways scroll, and the page shows no "nan"."""
    page = tmp_path / "verdict.html"
    page.write_text('<html><body style="font-family:sans-serif;font-size:14px"><div style="width:512px">'
                    + _verdict_fragment() + "</div></body></html>", encoding="utf-8")
    b = Browser(exe, width=1400, height=1000, timeout=30)
    try:
        b.navigate(page.as_uri())
        seen = b.evaluate("(() => { const t = document.querySelector('table.prbench-verdict');"
                          " return {width: t.getBoundingClientRect().width, box: t.parentElement.clientWidth,"
                          " text: document.body.innerText}; })()")
        assert b.errors() == []
    finally:
        b.close()
    assert seen["width"] <= seen["box"] == 512, seen
    assert not re.search(r"\bnan\b", seen["text"], re.I), seen["text"]
