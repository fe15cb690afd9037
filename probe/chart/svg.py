"""The report's renderer: panels (:class:`~.panel.Panel`) as inline SVG, drawn without matplotlib.

A chart is a grid of panels; every panel has a title, axis labels on both axes, ticks from
:mod:`.axes` (1-2-5 steps, decades, no two labels overlapping) and its legend in a column beside the
plot, never over the data. Each point carries a hover title with its exact value. Panels in the same
position across runs share their axes when the caller passes the same limits (``xlim``/``ylim``).

A chart costs milliseconds (a heat map is one small PNG inside the SVG), so a report can show every
stored snapshot behind its step slider, and a live page rebuilds in no time. Text from a run (group,
split and tensor names) is escaped here, in :func:`_el`, the one place this module writes markup.
"""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

from ..printable import markup_text
from . import axes as A
from .panel import Panel, colour, extent

FONT = 12            # tick labels, legend and axis labels, px (readable at 100 % zoom)
TITLE = 13
LEGEND_CHARS = 18    # a longer series name is cut (its whole name in the hover title)
NAME_CHARS = 30      # a longer category name (a tensor, a norm site) is cut on its axis, whole in its bar's title


def _esc(value) -> str:
    """Text for markup: the page's own escaper (markupsafe, Jinja2's autoescape), after :func:`markup_text`."""
    from markupsafe import escape

    return str(escape(markup_text(str(value))))


def _el(tag: str, text=None, children: str = "", **attrs) -> str:
    """One element; every attribute value and text is escaped here (``class_`` -> ``class``)."""
    a = "".join(f" {k.rstrip('_').replace('_', '-')}='{_esc(v)}'" for k, v in attrs.items() if v is not None)
    inner = (_esc(text) if text is not None else "") + children
    return f"<{tag}{a}>{inner}</{tag}>" if inner else f"<{tag}{a}/>"


def _n(v: float) -> str:
    return f"{v:.1f}"


def _scale(kind: str, lims, categories=None) -> A.Scale:
    if kind == "band":
        return A.band(categories)
    if kind == "unit":
        return A.linear(0.0, 1.0, 5, fixed=True)
    lo, hi = lims
    if kind == "log":
        return A.log(lo, hi)
    if kind == "symlog":
        return A.symlog(hi)
    return A.linear(lo, hi, 5, integer=kind == "int")


def _legend_width(labels) -> float:
    if len(labels) < 2:
        return 0.0
    return 26 + max(A.text_width(_cut(lab), FONT) for lab in labels)


def _cut(label: str, most: int = LEGEND_CHARS) -> str:
    label = str(label)
    return label if len(label) <= most else label[:most - 1] + "…"


def to_svg(panels: list[Panel], width: int = 330, height: int = 230, cols: int = 2) -> str:
    """The panels as one ``<svg>`` (``width`` x ``height`` px per panel, ``cols`` per row)."""
    cols = max(1, min(cols, len(panels)))
    rows = (len(panels) + cols - 1) // cols
    body = "".join(_panel(p, (n % cols) * width, (n // cols) * height, width, height) for n, p in enumerate(panels))
    w, h = cols * width, rows * height
    return _el("svg", None, body, xmlns="http://www.w3.org/2000/svg", width=w, height=h,
               viewBox=f"0 0 {w} {h}", class_="chart", font_family="DejaVu Sans, sans-serif", font_size=FONT)


def _panel(p: Panel, ox: float, oy: float, width: float, height: float) -> str:
    out = [_el("text", p.title, x=_n(ox + width / 2), y=_n(oy + TITLE + 2), text_anchor="middle",
               font_weight="bold", font_size=TITLE, class_="title")]
    labels = p.labels()
    if p.kind == "heat":
        return _el("g", None, "".join(out) + _heat(p, ox, oy, width, height), class_="panel")
    if p.kind in ("bar", "barh"):
        vals = [v for lab in labels for v in p.series[lab]]
        xs, ys = (vals, []) if p.kind == "barh" else ([], vals)
    else:
        xs = [x for lab in labels for x in p.series[lab][0]]
        ys = [y for lab in labels for y in p.series[lab][1]]
    ys += [p.hline[0]] if p.hline is not None else []
    xs += [p.vline[0]] if p.vline is not None else []
    xl, yl = extent(xs, p.xscale, p.xlim), extent(ys, p.yscale, p.ylim)
    if (p.kind != "bar" and p.xscale != "unit" and xl is None) or (p.kind != "barh" and p.yscale != "unit"
                                                                    and yl is None):
        out.append(_el("text", "no finite values", x=_n(ox + width / 2), y=_n(oy + height / 2), text_anchor="middle"))
        return _el("g", None, "".join(out), class_="panel")
    if p.kind == "bar" and p.yscale != "log" and yl is not None:
        yl = (min(0.0, yl[0]), max(0.0, yl[1]))   # bars grow from zero
    if p.kind == "barh" and p.xscale != "log" and xl is not None:
        xl = (min(0.0, xl[0]), max(0.0, xl[1]))
    sx = _scale("band" if p.kind == "bar" else p.xscale, xl, p.categories)
    sy = _scale("band" if p.kind == "barh" else p.yscale, yl, [_cut(c, NAME_CHARS) for c in p.categories[::-1]])
    ylabels = [lab for _, lab in sy.ticks]
    ml = 8 + FONT + 6 + max([A.text_width(t, FONT) for t in ylabels] or [0])
    lw = _legend_width(labels)
    mr = max(lw, A.text_width(sx.ticks[-1][1] if sx.ticks else "", FONT) / 2 + 4)
    mt, mb = TITLE + 12, 2 * FONT + 14
    box = (ox + ml, oy + mt, width - ml - mr, height - mt - mb)
    X = lambda v: box[0] + sx.unit(v) * box[2]   # noqa: E731
    Y = lambda v: box[1] + box[3] - sy.unit(v) * box[3]   # noqa: E731
    out.append(_el("rect", x=_n(box[0]), y=_n(box[1]), width=_n(box[2]), height=_n(box[3]), fill="none",
                   stroke="#bbb", class_="plot"))
    out += _ticks(sx, sy, box, X, Y)
    out += _axis_labels(p, ox, oy, height, box)
    for ref, across in ((p.hline, True), (p.vline, False)):   # dashed reference lines, across or up and down
        if ref is not None and (sy if across else sx).keeps(ref[0]):
            at = Y(ref[0]) if across else X(ref[0])
            x1, x2, y1, y2 = (box[0], box[0] + box[2], at, at) if across else (at, at, box[1], box[1] + box[3])
            out.append(_el("line", None, _el("title", f"{ref[1]}: {ref[0]:.4g}"), x1=_n(x1), x2=_n(x2), y1=_n(y1),
                           y2=_n(y2), stroke="#888", stroke_dasharray="3 3"))
    draw = {"line": _lines, "scatter": _scatter, "bar": _bars, "barh": _bars}[p.kind]
    out += draw(p, labels, sx, sy, box, X, Y)
    if lw:
        lx = box[0] + box[2] + 10
        for i, lab in enumerate(labels):
            ly = box[1] + 6 + i * (FONT + 5)
            c = colour(lab, i)
            out.append(_el("line", x1=_n(lx), x2=_n(lx + 12), y1=_n(ly), y2=_n(ly), stroke=c, stroke_width=2.5))
            out.append(_el("text", _cut(lab), _el("title", lab), x=_n(lx + 16), y=_n(ly + FONT / 2 - 1.5), fill="#222",
                           class_="legend"))
    return _el("g", None, "".join(out), class_="panel")


def _axis_labels(p: Panel, ox: float, oy: float, height: float, box: tuple) -> list[str]:
    """The x label under the panel, the y label turned up its left edge, both centred on the plot."""
    cy, lx = box[1] + box[3] / 2, ox + FONT + 1
    return [_el("text", p.xlabel, x=_n(box[0] + box[2] / 2), y=_n(oy + height - 5), text_anchor="middle",
                fill="#333", class_="xlabel"),
            _el("text", p.ylabel, x=_n(lx), y=_n(cy), text_anchor="middle", fill="#333",
                transform=f"rotate(-90 {_n(lx)} {_n(cy)})", class_="ylabel")]


def _ticks(sx, sy, box, X, Y) -> list[str]:
    out = []
    xt = [(v, s) for v, s in sx.ticks if sx.lo - 1e-9 <= v <= sx.hi + 1e-9]
    keep = A.thin([X(v) for v, _ in xt], [A.text_width(s, FONT) for _, s in xt])
    for i in keep:
        v, s = xt[i]
        out.append(_el("line", x1=_n(X(v)), x2=_n(X(v)), y1=_n(box[1] + box[3]), y2=_n(box[1] + box[3] + 4),
                       stroke="#888"))
        out.append(_el("text", s, x=_n(X(v)), y=_n(box[1] + box[3] + 5 + FONT), text_anchor="middle",
                       class_="tick xtick"))
    yt = [(v, s) for v, s in sy.ticks if sy.lo - 1e-9 * abs(sy.hi - sy.lo) <= v <= sy.hi + 1e-9 * abs(sy.hi - sy.lo)]
    order = sorted(range(len(yt)), key=lambda i: Y(yt[i][0]))        # top to bottom on the page
    keep = [order[j] for j in A.thin([Y(yt[i][0]) for i in order], [FONT + 2] * len(yt), gap=3)]
    for i in sorted(keep):
        v, s = yt[i]
        y = Y(v)
        out.append(_el("line", x1=_n(box[0]), x2=_n(box[0] + box[2]), y1=_n(y), y2=_n(y), stroke="#eee"))
        out.append(_el("text", s, x=_n(box[0] - 4), y=_n(y + FONT * 0.35), text_anchor="end", class_="tick ytick"))
    return out


def _lines(p, labels, sx, sy, box, X, Y) -> list[str]:
    out = []
    for i, lab in enumerate(labels):
        xs, ys = p.series[lab]
        pts = [(float(x), float(y)) for x, y in zip(xs, ys) if sx.keeps(x) and sy.keeps(y)]
        if not pts:
            continue
        c = colour(lab, i)
        out.append(_el("polyline", None, _el("title", lab), fill="none", stroke=c, stroke_width=1.8,
                       points=" ".join(f"{_n(X(x))},{_n(Y(y))}" for x, y in pts)))
        r = 2.5 if len(pts) <= 40 else 4
        for x, y in pts:
            out.append(_el("circle", None, _el("title", f"{lab} · {p.xlabel} {x:g}: {y:.4g}"), cx=_n(X(x)),
                           cy=_n(Y(y)), r=r, fill=c, fill_opacity=1 if len(pts) <= 40 else 0))
    return out


def _scatter(p, labels, sx, sy, box, X, Y) -> list[str]:
    out = []
    for i, lab in enumerate(labels):
        xs, ys = p.series[lab]
        names = p.names.get(lab) or [""] * len(xs)
        c = colour(lab, i)
        for x, y, name in zip(xs, ys, names):
            if sx.keeps(x) and sy.keeps(y):
                out.append(_el("circle", None, _el("title", f"{lab} {name}: ({x:.3g}, {y:.3g})"), cx=_n(X(x)),
                               cy=_n(Y(y)), r=3.5, fill=c, fill_opacity=0.85))
    return out


def _bars(p, labels, sx, sy, box, X, Y) -> list[str]:
    """Bars from zero: up over the categories ("bar"), or right beside them, the first at the top ("barh")."""
    out = []
    n, flat = len(p.categories), p.kind == "barh"
    val, V = (sx, X) if flat else (sy, Y)
    slot = (box[3] if flat else box[2]) / max(1, n)
    bw = 0.8 * slot / max(1, len(labels))
    base = V(max(val.lo, 0.0)) if val.kind != "log" else (box[0] if flat else box[1] + box[3])
    for i, lab in enumerate(labels):
        c = colour(lab, i)
        for j, v in enumerate(p.series[lab]):
            if not val.keeps(v):
                continue
            start, end = (Y(n - 1 - j) if flat else X(j)) - 0.4 * slot + i * bw, V(v)
            along, across = (min(end, base), max(abs(end - base), 0.5)), (start, max(bw, 0.5))
            x, w, y, h = (*along, *across) if flat else (*across, *along)
            tip = f"{p.categories[j]} · {lab}: {v:.4g}" if flat else f"{lab} · {p.xlabel} {p.categories[j]}: {v:.4g}"
            out.append(_el("rect", None, _el("title", tip), x=_n(x), y=_n(y), width=_n(w), height=_n(h), fill=c))
    return out


# --- heat maps -----------------------------------------------------------------------------------

def _lut(cmap: str) -> np.ndarray:
    import matplotlib

    return (matplotlib.colormaps[cmap](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.uint8)


def png(rgb: np.ndarray) -> bytes:
    """An (h, w, 3) uint8 image as PNG bytes (zlib: no imaging library needed)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _image(m: np.ndarray, cmap: str, vmin: float, vmax: float) -> str:
    lut = _lut(cmap)
    with np.errstate(invalid="ignore"):
        idx = np.clip((m - vmin) / (vmax - vmin) * 255, 0, 255)
    rgb = lut[np.nan_to_num(idx, nan=0).astype(int)]
    rgb[~np.isfinite(m)] = (200, 200, 200)
    return "data:image/png;base64," + base64.b64encode(png(rgb)).decode("ascii")


def _heat(p: Panel, ox, oy, width, height) -> str:
    m = np.asarray(p.matrix, dtype=float)
    log = p.cscale == "log"   # colours over log10 of the values (norms' ε shares span decades)
    lo, hi = (np.log10(p.vmin), np.log10(p.vmax)) if log else (p.vmin, p.vmax)
    r, c = m.shape
    ml = 8 + FONT + 6 + max([A.text_width(str(s), FONT) for s in p.rows] or [0])
    mt, mb, cbw = TITLE + 12, 2 * FONT + 14, 64
    side = min(width - ml - cbw - 8, height - mt - mb)
    box = (ox + ml, oy + mt, side * c / max(r, c), side * r / max(r, c))
    with np.errstate(divide="ignore", invalid="ignore"):
        shown = np.log10(m) if log else m
    out = [_el("image", href=_image(shown, p.cmap, lo, hi), x=_n(box[0]), y=_n(box[1]), width=_n(box[2]),
               height=_n(box[3]), preserveAspectRatio="none", style="image-rendering:pixelated")]
    out.append(_el("rect", x=_n(box[0]), y=_n(box[1]), width=_n(box[2]), height=_n(box[3]), fill="none", stroke="#bbb",
                   class_="plot"))
    cw, rh = box[2] / c, box[3] / r
    xpos = [box[0] + (j + 0.5) * cw for j in range(c)]
    for j in A.thin(xpos, [A.text_width(str(s), FONT) for s in p.cols]):
        out.append(_el("text", p.cols[j], x=_n(xpos[j]), y=_n(box[1] + box[3] + 4 + FONT), text_anchor="middle",
                       class_="tick xtick"))
    ypos = [box[1] + (i + 0.5) * rh for i in range(r)]
    for i in A.thin(ypos, [FONT + 1] * r, gap=2):
        out.append(_el("text", p.rows[i], x=_n(box[0] - 4), y=_n(ypos[i] + FONT * 0.35), text_anchor="end",
                       class_="tick ytick"))
    out += _axis_labels(p, ox, oy, height, box)
    # the colour bar, its range written at its ends and middle
    bx = box[0] + box[2] + 10
    grad = np.linspace(hi, lo, 64)[:, None]
    out.append(_el("image", href=_image(grad, p.cmap, lo, hi), x=_n(bx), y=_n(box[1]), width=10,
                   height=_n(box[3]), preserveAspectRatio="none"))
    out.append(_el("rect", x=_n(bx), y=_n(box[1]), width=10, height=_n(box[3]), fill="none", stroke="#bbb"))
    for v in (hi, (lo + hi) / 2, lo):
        y = box[1] + (hi - v) / (hi - lo) * box[3]
        out.append(_el("text", A.fmt(10 ** v) if log else A.fmt(v, abs(hi - lo) / 4), x=_n(bx + 13),
                       y=_n(y + FONT * 0.35), class_="tick ctick"))
    return "".join(out)


__all__ = ["to_svg", "png"]
