"""The report in a real browser: headless Chromium (Debian's package; the README's test command
installs it) opens the page; no console errors, every figure drawn with a non-zero size, the step
slider works, and a live page changes by itself while a real training run gains snapshots. The
screenshots stay in the test's temp folder (printed with -s; not golden images)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import probe
from browser import ARTIFACTS, Browser, chromium
from conftest import popen_cli, run_cli
from probe.format import last_step
from test_report import FAST, paused, shown_step, train_live
from waiting import wait_for

EXE = chromium()
DEMO_PROBES = ["-p", "similarity", "-p", "pca", "-p", "align", "-p", "condense", "-p", "theory", "-p", "attention",
               "-p", "bias"]   # examples/demo.py's
pytestmark = pytest.mark.skipif(EXE is None and not os.environ.get("PROBE_REQUIRE_BROWSER"),
                                reason="no chromium (apt-get install chromium)")

# every chart of the page, each slider step's included (all shown for the look), with what a reader would
# trip over: text outside its SVG, tick labels on top of each other, a panel without axis labels, a legend
# over the data, text under 10 px as drawn
LOOK_JS = """(function () {
  const style = document.createElement('style');
  style.textContent = '.steps figure{display:block !important}';
  document.head.appendChild(style);
  const bad = [];
  function hit(a, b) { return a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5; }
  const svgs = Array.from(document.querySelectorAll('svg.chart'));
  let panels = 0, texts = 0;
  svgs.forEach(function (svg, n) {
    const box = svg.getBoundingClientRect();
    const zoom = box.width / svg.viewBox.baseVal.width;
    const where = (svg.closest('section') || {}).id + ' chart ' + n;
    svg.querySelectorAll('text').forEach(function (t) {
      texts += 1;
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        bad.push(where + ': text outside its SVG: ' + t.textContent);
      }
      const px = parseFloat(getComputedStyle(t).fontSize) * zoom;
      if (px < 10) { bad.push(where + ': text drawn at ' + px.toFixed(1) + ' px: ' + t.textContent); }
    });
    svg.querySelectorAll('g.panel').forEach(function (g) {
      panels += 1;
      const empty = Array.from(g.querySelectorAll('text')).some(function (t) { return t.textContent === 'no finite values'; });
      ['xlabel', 'ylabel'].forEach(function (c) {
        const t = g.querySelector('text.' + c);
        if (!empty && !(t && t.textContent.trim())) { bad.push(where + ': a panel without its ' + c); }
      });
      ['xtick', 'ytick', 'ctick'].forEach(function (c) {
        const ts = Array.from(g.querySelectorAll('text.' + c)).map(function (t) { return [t.textContent, t.getBoundingClientRect()]; });
        for (let i = 0; i < ts.length; i++) { for (let j = i + 1; j < ts.length; j++) {
          if (hit(ts[i][1], ts[j][1])) { bad.push(where + ': ' + c + ' labels overlap: ' + ts[i][0] + ' / ' + ts[j][0]); }
        } }
      });
      const plot = g.querySelector('rect.plot');
      g.querySelectorAll('text.legend').forEach(function (t) {
        if (plot && hit(t.getBoundingClientRect(), plot.getBoundingClientRect())) { bad.push(where + ': legend over the data: ' + t.textContent); }
      });
    });
  });
  style.remove();
  return {charts: svgs.length, panels: panels, texts: texts, bad: bad};
})()"""

# what the first screen shows, without scrolling: the differing fields and every run's curves
FIRST_SCREEN_JS = """(function () {
  const h = window.innerHeight;
  const differs = document.querySelector("table[data-name='config-differs']");
  const curves = Array.from(document.querySelectorAll('#curves svg.chart'));
  return {differs: differs ? Array.from(differs.querySelectorAll('tbody td:first-child')).map(function (td) { return td.textContent; }) : null,
          differs_visible: !!differs && differs.getBoundingClientRect().bottom <= h,
          curves: curves.length, curves_visible: curves.every(function (c) { return c.getBoundingClientRect().bottom <= h; })};
})()"""


def look(browser, page: Path, shot_name: str) -> dict:
    """Open ``page`` at the top, check every chart (LOOK_JS) and the first screen, store a screenshot of
    the first screen as a test artefact; returns the counts."""
    browser.open(page.as_uri())
    first = browser.eval(FIRST_SCREEN_JS)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / shot_name
    browser.screenshot(str(shot), full=False)
    print(f"first screen: {shot}")
    assert shot.stat().st_size > 10_000
    assert first["differs"] == ["gamma"] and first["differs_visible"], first
    assert first["curves"] == 2 and first["curves_visible"], first
    seen = browser.eval(LOOK_JS)
    assert seen["bad"] == [], "\n".join(seen["bad"][:20])
    assert browser.errors() == []
    return seen


@pytest.fixture()
def browser():
    if EXE is None:
        pytest.fail("PROBE_REQUIRE_BROWSER is set but chromium is not installed")
    b = Browser(EXE)
    yield b
    b.close()


def test_report_reads_at_a_glance_in_chromium(two_runs, tmp_path, browser):
    """The demo's report (its probes; tiny runs): the first screen says what differs and shows both runs'
    curves; every chart passes the look; the slider reaches every snapshot and moves."""
    a, b = two_runs
    page = tmp_path / "report.html"
    res = run_cli("probe", "report", a, b, "-o", page, *DEMO_PROBES, "--max-steps", "4")
    assert res.returncode == 0, res.stderr
    seen = look(browser, page, "report-first-screen.png")
    n = len(probe.info(a)["steps"])
    assert seen["charts"] >= 2 * 6 * n and seen["panels"] > seen["charts"]   # a chart per step, probe and run
    moved = browser.eval("""(function () {
      const box = document.querySelector('.steps[data-name]');
      const s = box.querySelector('.slider');
      s.value = 0; s.dispatchEvent(new Event('input'));
      const on = box.querySelector('figure.on');
      const r = on.querySelector('svg').getBoundingClientRect();
      return {step: on.dataset.step, shown: box.querySelector('output').textContent, w: r.width, h: r.height,
              max: Number(s.max)};
    })()""")
    assert moved["step"] == moved["shown"] == "0" and moved["w"] > 0 and moved["h"] > 0
    assert moved["max"] == n - 1                                   # every stored snapshot
    # a chart's download link gets the chart itself, as an SVG file (kept from navigating in the test)
    got = browser.eval("""(async function () {
      const a = document.querySelector('#curves a.svgdl');
      a.addEventListener('click', function (e) { e.preventDefault(); });
      a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
      const text = await (await fetch(a.href)).text();
      return {href: a.href.slice(0, 5), text: text, name: a.getAttribute('download'),
              inline: a.closest('figure').querySelector('svg').outerHTML.length};
    })()""")
    assert got["href"] == "blob:" and got["name"].endswith("-curves.svg")
    svg = ET.fromstring(got["text"].encode())
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and len(list(svg.iter("{http://www.w3.org/2000/svg}polyline"))) >= 2
    # hover values: every point of a line carries its exact value
    titles = browser.eval("Array.from(document.querySelectorAll('#curves circle title')).map(t => t.textContent)")
    assert titles and all(re.fullmatch(r"\S+ · step( \(log scale\))? \d+: [-\d.e]+", t) for t in titles), titles[:3]
    assert browser.errors() == []


@pytest.mark.slow
def test_demo_report_reads_at_a_glance(tmp_path, browser):
    """The demo itself (examples/demo.py: two runs of 3000 steps, ~2.5 min on 2 cores), its page looked at."""
    out = tmp_path / "demo-out"
    res = subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "examples" / "demo.py"),
                          "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    look(browser, out / "report.html", "demo-report-first-screen.png")


@pytest.mark.slow   # 34 s (CI time); test_report.py follows a training run's pages without a browser
def test_live_page_changes_by_itself(tmp_path, browser):
    run, trainer = train_live(tmp_path, steps=1600, every=200)
    page = tmp_path / "live.html"
    watcher = popen_cli("probe", "report", run, "-o", page, "--watch", "--interval", "0.3", "-p", "bias",
                        "--max-steps", "2")
    try:
        # the trainer is held at its first committed step until the browser has the page showing it
        wait_for(lambda: last_step(run) is not None, "first snapshot", trainer)
        with paused(trainer):
            first = str(last_step(run))
            wait_for(lambda: shown_step(page) == first, f"page at step {first}", watcher)
            browser.open(page.as_uri())
            assert browser.eval("document.querySelector('.latest-step').textContent") == first
            live = browser.eval("!!document.querySelector('meta[name=probe-live]')")

        def moved():   # no reload by the test: the page does it
            try:
                return browser.eval("document.querySelector('.latest-step').textContent") != first
            except RuntimeError:    # evaluated while the page was reloading
                return False

        wait_for(moved, "a newer step in the open page", watcher)
        browser.screenshot(str(tmp_path / "live.png"))
        assert live and first != "1600", first
        assert browser.errors() == []
        assert watcher.wait(timeout=180) == 0
    finally:
        trainer.kill(), watcher.kill()
