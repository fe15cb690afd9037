"""The docs site as a reader sees it: the site is built (``mkdocs build --strict``) and headless Chromium
opens every page. On every page: nothing wider than the text column (a wide table or code block
scrolls inside its own box, on purpose), every formula rendered (MathML, no raw ``\\(``), no link
whose text is a bare path and no Markdown link left unrendered, every image loaded, no console
error. Screenshots of the main pages are kept in test-artifacts/docs/ (not golden images: for a person)."""
from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from browser import ARTIFACTS, Browser, chromium
from docpages import ROOT

EXE = chromium()
pytestmark = pytest.mark.skipif(EXE is None and not os.environ.get("PROBE_REQUIRE_BROWSER"),
                                reason="no chromium (apt-get install chromium)")
MAIN = ["index.html", "getting-started/index.html", "tutorials/paper1/index.html", "how-to/probes/index.html",
        "explanation/paper2/index.html", "reference/cli/index.html", "reference/notation/index.html"]

# what a reader would trip over on one page, as a list of findings
LOOK_JS = r"""(function () {
  const bad = [];
  const col = document.querySelector('article.md-content__inner');
  if (!col) { return ['no article']; }
  const edge = col.getBoundingClientRect().right;
  // an element that sticks out of the column, unless it or a box around it scrolls (a table's scroll
  // box reaches 0.8rem past the text on purpose, Material's design)
  function scrolls(el) {
    for (let p = el; p && p !== col; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if (ox === 'auto' || ox === 'scroll') { return true; }
    }
    return false;
  }
  col.querySelectorAll('*').forEach(function (el) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > edge + 4 && !scrolls(el)) {
      bad.push('wider than the column by ' + Math.round(r.right - edge) + ' px: <' + el.tagName.toLowerCase() + '> ' + el.textContent.slice(0, 60));
    }
  });
  const walker = document.createTreeWalker(col, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('pre, code')) { continue; }
    const t = n.textContent;
    if (/\\\(|\\\[/.test(t)) { bad.push('raw TeX: ' + t.slice(0, 60)); }
    if (/\]\(|\(\.\.?\//.test(t)) { bad.push('a Markdown link left as text: ' + t.slice(0, 80)); }
  }
  col.querySelectorAll('a').forEach(function (a) {
    const t = a.textContent.trim();
    if (/^(\.\.?\/)?[\w.-]+(\/[\w.-]+)*\.(md|html)$/.test(t)) { bad.push('link text is a bare path: ' + t); }
  });
  document.querySelectorAll('img').forEach(function (img) {
    if (!img.complete || img.naturalWidth === 0) { bad.push('image not loaded: ' + img.getAttribute('src')); }
  });
  return bad;
})()"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(the built site's folder, its address): served over HTTP as a reader gets it (the search index
    is fetched, which a file:// page may not)."""
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    p = subprocess.run([str(mkdocs), "build", "--strict", "-d", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield out, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def errors(log: list[dict]) -> list[str]:
    """Console errors and failed loads, but for the theme's fetch of the repository's star count from
    api.github.com (the site's header asks GitHub; the tests run offline)."""
    out = []
    for m in log:
        entry = m.get("params", {}).get("entry", {})
        if m.get("method") == "Log.entryAdded" and entry.get("level") == "error":
            if "api.github.com" not in entry.get("url", ""):
                out.append(f"{entry.get('text', '')} {entry.get('url', '')}")
        elif m.get("method") == "Runtime.exceptionThrown":
            out.append(str(m["params"].get("exceptionDetails", {}).get("exception", {}).get("description", ""))[:300])
        elif m.get("method") == "Runtime.consoleAPICalled" and m["params"].get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in m["params"].get("args", [])))
    return out


def test_every_page_reads_well_in_a_browser(site):
    site, url = site
    pages = sorted(q for q in site.rglob("index.html") if "assets" not in q.parts and q.parent.name != "404")
    assert len(pages) > 30
    browser = Browser(EXE)
    findings = {}
    shots = ARTIFACTS / "docs"
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):
        old.unlink()
    try:
        # a narrow laptop window: the text column is then narrower than the widest tables
        browser.send("Emulation.setDeviceMetricsOverride", session=True, width=1100, height=900,
                     deviceScaleFactor=1, mobile=False)
        for page in pages:
            n = len(browser.log)
            browser.open(url + page.relative_to(site).as_posix())
            bad = browser.eval(LOOK_JS) + errors(browser.log[n:])
            if page.parent.name == "cli":   # help text is read whole: none of it may hide behind a scroll bar
                bad += browser.eval("Array.from(document.querySelectorAll('article pre > code'))"
                                    ".filter(c => c.scrollWidth > c.clientWidth + 1)"
                                    ".map(c => 'help wider than its box: ' + c.textContent.slice(0, 60))")
            if bad:
                findings[str(page.relative_to(site))] = bad[:5]
            rel = str(page.relative_to(site))
            if rel in MAIN:
                shot = shots / ((rel.removesuffix("index.html").strip("/").replace("/", "_") or "home") + ".png")
                browser.screenshot(str(shot))
                print(f"screenshot: {shot}")
    finally:
        browser.close()
    assert not findings, "\n".join(f"{k}: {v}" for k, v in findings.items())
    assert sorted(q.stat().st_size > 10_000 for q in shots.glob("*.png")) == [True] * len(MAIN)
