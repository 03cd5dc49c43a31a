"""The headless-Chromium driver of the report's browser test (tests/report_browser.py) on a small page:
console errors and uncaught exceptions are caught, a page's values read, a screenshot taken. The
report itself is opened by tests/test_e2e.py::test_report_in_browser. CI sets PRBENCH_BROWSER_TEST=1
(.ci/run), which turns a missing chromium into a failure; elsewhere these tests skip."""
import os

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
