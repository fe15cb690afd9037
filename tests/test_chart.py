"""One picture per probe: the report's SVG and the ``--plot`` file draw the same description (a probe's
``chart``, its ``charts``, the trajectory), checked on what each draws: the report's hover titles and
text, the matplotlib figure's artists and the written file's text."""
import html
import re

import numpy as np
import pytest

from conftest import svg_texts


def _report_svg(name, r) -> str:
    from probe import registry
    from probe.report import charts

    return charts.step_figure(registry.get(name), r)


def _hover(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<title>(.*?)</title>", svg)]


def _svg_titles(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*class='title'[^>]*>(.*?)</text>", svg)]


@pytest.fixture(scope="module")
def drawn(tiny_run, tmp_path_factory):
    """Each probe's result at the last step, its report SVG, its matplotlib figure and its --plot file."""
    import probe
    from probe import registry
    from probe.chart.mpl import figure, plot_results

    out = tmp_path_factory.mktemp("plots")
    got = {}
    for name, kw in (("similarity", {}), ("pca", {"tokens": "keys,reasoning,memory"}), ("spectrum", {})):
        r = getattr(probe, name)(tiny_run, **kw)
        plot_results(name, r, out / f"{name}.svg", f"run: {name}")
        got[name] = (r[0], _report_svg(name, r[0]), figure(registry.get(name).chart(r[0])), svg_texts(out / f"{name}.svg"))
    yield got
    from probe.chart import pyplot

    pyplot().close("all")


def test_both_renderers_title_the_same_panels(drawn):
    for name, (r, report, fig, plot_texts) in drawn.items():
        titles = _svg_titles(report)
        assert titles and titles == [ax.get_title() for ax in fig.axes if ax.get_title()], name
        assert set(titles) <= set(plot_texts), name                    # the --plot file draws them as text
        assert f"run: {name}, step {r.step}" in plot_texts


def test_the_similarity_heat_map_is_the_results_matrix(drawn):
    r, report, fig, plot_texts = drawn["similarity"]
    (im,) = fig.axes[0].get_images()
    assert np.array_equal(np.asarray(im.get_array()), r.matrix)
    ids = [str(int(i)) for i in r.ids]
    assert set(re.findall(r"class='tick xtick'>(\d+)<", report)) <= set(ids)   # the report's rows and columns
    assert {t.get_text() for t in fig.axes[0].get_xticklabels()} <= set(ids)
    assert "cosine similarity" in plot_texts                                   # the colour bar's label


def test_the_pca_points_are_the_results_coordinates(drawn):
    r, report, fig, _ = drawn["pca"]
    want = {(g, str(int(i))): (x, y) for g, i, (x, y) in zip(r.groups, r.ids, np.asarray(r.coords)[:, :2])}
    hover = {}
    for t in _hover(report):                      # "{group} {token}: (x, y)" on each point of the report
        m = re.fullmatch(r"(\S+) (\d+): \((\S+), (\S+)\)", t)
        if m:
            hover[m.group(1), m.group(2)] = (float(m.group(3)), float(m.group(4)))
    assert hover.keys() == want.keys()
    for k, (x, y) in want.items():
        assert hover[k] == pytest.approx((x, y), rel=5e-3, abs=1e-12)
    drawn_points = np.concatenate([c.get_offsets() for c in fig.axes[0].collections])
    assert np.array_equal(np.array(sorted(map(tuple, drawn_points))), np.array(sorted(want.values())))


def test_the_spectrum_bars_are_the_results_alphas(drawn):
    r, report, fig, _ = drawn["spectrum"]
    alphas = {layer.name: layer.alpha for layer in r.layers}
    hover = dict(t.rsplit(" · α: ", 1) for t in _hover(report) if " · α: " in t)
    assert {k: float(v) for k, v in hover.items()} == pytest.approx(alphas, rel=1e-3)
    bars = [p.get_width() for p in fig.axes[0].patches]
    names = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert dict(zip(names, bars)) == pytest.approx(alphas)


def test_several_steps_draw_the_probes_charts_or_the_reports_trajectory(tiny_run):
    """similarity over every step: a heat map per step, at most MAX_PANELS spread over them; a probe
    without ``charts``: the trajectory the report draws, its lines the summary numbers."""
    import probe
    from probe import registry
    from probe.chart import pyplot
    from probe.chart.mpl import figure
    from probe.chart.panel import MAX_PANELS, trajectory
    from probe.report import charts

    res = probe.similarity(tiny_run, step="all")
    assert len(res) > MAX_PANELS
    fig = figure(registry.get("similarity").charts(res))
    maps = [np.asarray(ax.get_images()[0].get_array()) for ax in fig.axes if ax.get_images()]
    assert len(maps) == MAX_PANELS and np.array_equal(maps[0], res[0].matrix) and np.array_equal(maps[-1], res[-1].matrix)
    steps, summaries = [r.step for r in res], [r.summary() for r in res]
    fig = figure(trajectory(steps, summaries))
    line = next(ln for ax in fig.axes if ax.get_title() == "mean_offdiag" for ln in ax.get_lines())
    assert list(line.get_xdata()) == steps and list(line.get_ydata()) == pytest.approx([s["mean_offdiag"] for s in summaries])
    report = charts.trajectory(steps, summaries)
    shown = [float(t.rsplit(": ", 1)[1]) for t in _hover(report) if t.startswith("mean_offdiag · ")]
    assert shown == pytest.approx([s["mean_offdiag"] for s in summaries], rel=1e-3)
    pyplot().close("all")


def test_a_similarity_without_its_matrix_is_a_clear_error_and_no_file(tmp_path):
    """Above 4096 tokens similarity keeps only the summaries (no matrix): --plot says so in one line."""
    from probe.analyses.similarity import cosine_similarity_blocked
    from probe.chart.mpl import plot_results
    from probe.errors import ProbeError

    r = cosine_similarity_blocked(np.random.default_rng(0).normal(size=(6, 4)), np.arange(6), step=0)
    assert r.matrix is None
    with pytest.raises(ProbeError, match=r"too many tokens for a heat map \(more than 4096\); choose fewer with"):
        plot_results("similarity", [r], tmp_path / "sim.png", "t")
    assert not (tmp_path / "sim.png").exists()
