"""MkDocs hook: every formula becomes MathML when the site is built, so the pages show it without
network (a math library from a CDN would leave raw LaTeX offline) and without JavaScript; browsers
draw MathML themselves (Chromium since 109, Firefox, Safari)."""
from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

# pymdownx.arithmatex (generic mode) wraps inline math as <span class="arithmatex">\(..\)</span> and
# display math as <div class="arithmatex">\[..\]</div>, the TeX HTML-escaped.
# The wrapper stays: docs/stylesheets/extra.css lets a wide display formula scroll inside it.
_MATH = re.compile(r'(<(span|div) class="arithmatex">)\\[(\[](.*?)\\[)\]](</\2>)', re.S)


def mathml(match: re.Match) -> str:
    tex = html.unescape(match.group(3))
    display = "block" if match.group(2) == "div" else "inline"
    return match.group(1) + convert(tex, display=display) + match.group(4)


def on_page_content(content: str, **_) -> str:
    return _MATH.sub(mathml, content)
