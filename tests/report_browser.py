"""Open a Snakemake report in headless Chromium (Debian's `chromium` package) over the Chrome DevTools
Protocol on a pipe (`--remote-debugging-pipe`: NUL-separated JSON on fds 3 and 4, no websocket and
no PyPI client), collect the page's console errors and uncaught exceptions, show every figure of
the report through the report app's own view code, read the leaderboard table of the landing page
and take a screenshot. Used by tests/test_report_browser.py; also a script for the README's
screenshot:

    python tests/report_browser.py report.html docs/report.png
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page, driven over CDP on a pipe."""

    def __init__(self, exe: str, width: int = 1400, height: int = 1000, timeout: float = 60):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="prbench-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds():  # the child reads CDP from fd 3 and writes to fd 4
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=fds,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    # ---- protocol ------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium over the DevTools pipe")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-3000:] if self.proc.poll() is not None else ""
                raise RuntimeError(f"Chromium closed the DevTools pipe (exit {self.proc.poll()}): {err}")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluating {expression[:80]!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float | None = None):
        """Poll a JS expression until it is truthy; return its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"the page never showed {what} ({expression}); console errors: {self.errors()}")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete'", "a loaded document")

    def screenshot(self, path: str | Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Console errors, failed assertions, uncaught exceptions and error log entries so far."""
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], " ".join(str(a.get("value", a.get("description")))
                                                                    for a in p.get("args", []))))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
        return out

    def close(self) -> None:
        try:
            os.write(self._to_child, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)


# Show each figure through the report app's own code (ToggleViewManager: the button a reader clicks)
# and return, per figure, the rendered <img>'s natural size once decoded.
SHOW_FIGURE = """(async (path) => {
  new ToggleViewManager(app).handleSelectedResult(path);
  const want = results[path].data_uri;
  for (let i = 0; i < 200; i++) {
    const img = [...document.querySelectorAll('#app img')].find(im => im.getAttribute('src') === want);
    if (img && img.complete) {
      if (img.naturalWidth === 0) return {path, error: 'image did not decode'};
      return {path, width: img.naturalWidth, height: img.naturalHeight,
              shown: img.getBoundingClientRect().width};
    }
    await new Promise(r => setTimeout(r, 50));
  }
  return {path, error: 'no <img> for it appeared'};
})(%s)"""

LEADERBOARD = """(() => {
  const t = document.querySelector('table.prbench-leaderboard');
  if (!t) return null;
  const head = [...t.querySelectorAll('thead th')].map(c => c.textContent);
  const rows = [...t.querySelectorAll('tbody tr')].map(r => [...r.querySelectorAll('td')].map(c => c.textContent));
  const desc = document.querySelector('.prose');
  return {head, rows, width: t.getBoundingClientRect().width, height: t.getBoundingClientRect().height,
          description_top: desc ? desc.getBoundingClientRect().top : null};
})()"""

# The landing page's verdict (report/workflow.rst includes results/tables/verdict.html): its sentence,
# its table's rows, the table's width beside the width of the box it sits in (a wider table scrolls
# sideways), every "nan" on the page as shown, and the forest plot's decoded size.
VERDICT = """(() => {
  const t = document.querySelector('table.prbench-verdict');
  const s = document.querySelector('.prbench-verdict-sentence');
  const img = document.querySelector('img.prbench-forest');
  return {sentence: s ? s.textContent : null,
          head: t ? [...t.querySelectorAll('thead th')].map(c => c.textContent) : null,
          rows: t ? [...t.querySelectorAll('tbody tr')]
                      .map(r => [...r.querySelectorAll('td')].map(c => c.textContent)) : null,
          width: t ? t.getBoundingClientRect().width : null,
          box: t ? t.parentElement.clientWidth : null,
          window: window.innerWidth,
          nan: document.body.innerText.match(/.{0,40}\\bnan\\b.{0,40}/gi) || [],
          forest: img ? {width: img.naturalWidth, height: img.naturalHeight, complete: img.complete,
                         shown: img.getBoundingClientRect().width} : null};
})()"""

# The report's own Leaderboard entry: shown through the app (an <iframe> of the HTML file) and its
# table read from the same data the iframe shows.
SHOW_TABLE = """(async (path) => {
  new ToggleViewManager(app).handleSelectedResult(path);
  const want = results[path].data_uri;
  for (let i = 0; i < 200; i++) {
    const frame = [...document.querySelectorAll('#app iframe')].find(f => f.getAttribute('src') === want);
    if (frame) {
      const b64 = want.slice(want.indexOf('base64,') + 7);
      const text = new TextDecoder().decode(Uint8Array.from(atob(b64), c => c.charCodeAt(0)));
      const doc = new DOMParser().parseFromString(text, 'text/html');
      return {path, rows: doc.querySelectorAll('table tbody tr').length,
              columns: doc.querySelectorAll('table thead th').length, shown: frame.getBoundingClientRect().width};
    }
    await new Promise(r => setTimeout(r, 50));
  }
  return {path, error: 'no <iframe> for it appeared'};
})(%s)"""


def check_report(report: str | Path, screenshot: str | Path | None = None, exe: str | None = None) -> dict:
    """Load the report, read the landing page's verdict and leaderboard, show every figure and the
    Leaderboard entry, return what was seen: {"leaderboard", "verdict", "figures", "leaderboard_entry",
    "categories", "errors"}; with `screenshot`, a PNG of the landing page (the view a reader first sees)."""
    exe = exe or chromium()
    if not exe:
        raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
    b = Browser(exe)
    try:
        b.navigate(Path(report).resolve().as_uri())
        b.wait_for("typeof app !== 'undefined' && document.querySelector('#app') !== null"
                   " && document.querySelector('#app').children.length > 0", "the report app")
        board = b.wait_for(LEADERBOARD, "the leaderboard table", timeout=20)
        b.wait_for("(() => { const i = document.querySelector('img.prbench-forest'); return !i || i.complete; })()",
                   "the forest plot decoded", timeout=20)
        verdict = b.evaluate(VERDICT)
        if screenshot:
            time.sleep(0.5)  # let the rule graph finish drawing
            b.evaluate("document.querySelectorAll('*').forEach(el => { el.scrollTop = 0; }); window.scrollTo(0, 0)")
            b.screenshot(screenshot)
        categories = b.evaluate("categories")
        figures = [p for sub in categories.get("Figures", {}).values() for p in sub]
        shown = [b.evaluate(SHOW_FIGURE % json.dumps(p)) for p in figures]
        tables = [b.evaluate(SHOW_TABLE % json.dumps(p)) for sub in categories.get("Leaderboard", {}).values()
                  for p in sub]
        time.sleep(0.3)  # late console messages
        return {"leaderboard": board, "verdict": verdict, "figures": shown, "leaderboard_entry": tables,
                "categories": categories, "errors": b.errors()}
    finally:
        b.close()


if __name__ == "__main__":
    seen = check_report(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    print(json.dumps({k: v for k, v in seen.items() if k != "categories"}, indent=1)[:4000])
    sys.exit(1 if seen["errors"] or any("error" in f for f in seen["figures"]) else 0)
