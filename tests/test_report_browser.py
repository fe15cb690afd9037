"""The report in a real browser: headless Chromium (Debian's package; the README's test command
installs it) opens the page; no console errors, every figure drawn with a non-zero size, the step
slider works, and a live page changes by itself while a real training run gains snapshots. The
screenshots stay in the test's temp folder (printed with -s; not golden images)."""
from __future__ import annotations

import os

import pytest

from browser import Browser, chromium
from conftest import popen_cli, run_cli
from probe.format import last_step
from test_report import FAST, paused, shown_step, train_live
from waiting import wait_for

EXE = chromium()
pytestmark = pytest.mark.skipif(EXE is None and not os.environ.get("PROBE_REQUIRE_BROWSER"),
                                reason="no chromium (apt-get install chromium)")

# every figure, visible ones with their drawn size; hidden ones (other slider steps) decoded
FIGURES_JS = """Array.from(document.querySelectorAll('img.fig')).map(function (img) {
  const r = img.getBoundingClientRect();
  return {visible: img.offsetParent !== null, w: r.width, h: r.height, nw: img.naturalWidth,
          complete: img.complete};
})"""


@pytest.fixture()
def browser():
    if EXE is None:
        pytest.fail("PROBE_REQUIRE_BROWSER is set but chromium is not installed")
    b = Browser(EXE)
    yield b
    b.close()


def test_report_renders_in_chromium(two_runs, tmp_path, browser):
    a, b = two_runs
    page = tmp_path / "report.html"
    res = run_cli("probe", "report", a, b, "-o", page, *FAST)
    assert res.returncode == 0, res.stderr
    browser.open(page.as_uri())
    figs = browser.eval(FIGURES_JS)
    assert len(figs) >= 10
    assert all(f["complete"] and f["nw"] > 0 for f in figs), figs           # every image decoded
    visible = [f for f in figs if f["visible"]]
    assert visible and all(f["w"] > 0 and f["h"] > 0 for f in visible), visible
    # the slider shows another step's figure, drawn with a non-zero size
    moved = browser.eval("""(function () {
      const box = document.querySelector('.steps[data-name]');
      const s = box.querySelector('.slider');
      s.value = 0; s.dispatchEvent(new Event('input'));
      const on = box.querySelector('figure.on');
      const r = on.querySelector('img').getBoundingClientRect();
      return {step: on.dataset.step, shown: box.querySelector('output').textContent, w: r.width, h: r.height};
    })()""")
    assert moved["step"] == moved["shown"] == "0" and moved["w"] > 0 and moved["h"] > 0
    assert browser.eval("document.querySelectorAll('tr.diff').length") >= 1   # γ differs
    shot = tmp_path / "report.png"
    browser.screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    assert browser.errors() == []


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
