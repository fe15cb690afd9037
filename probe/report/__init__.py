"""A run report: one self-contained HTML page per run, or per set of runs side by side.

The page holds the run's configuration and task, its loss and accuracy curves per split, its
token groups (with their text for language runs), and for every probe that applies its
headline numbers at a few log-spaced steps, their trajectory, and its figure at every snapshot
(up to ``SLIDER_MAX``) behind a step slider. Charts are inline SVG (downloadable), tables are
plain HTML (copyable as TSV), the CSS and JavaScript are inline: the file opens offline.

A source is a snapshot file, a checkpoint folder or a folder of them (``checkpoint-500/``,
``step_1000``: weight probes only), or a hub model ``hf:ORG/NAME`` with ``revisions``.

:class:`Report` keeps what it computed, so :func:`watch` — which rewrites the page atomically
whenever a run gains a snapshot and lets the page reload itself — computes only new steps.

One module per concept: :mod:`.sources` (what a report shows, and the watch's CPU budget),
:mod:`.page` (the page model, and the page's data for ``templates/``, autoescaped), :mod:`.charts`
(what its charts show, drawn by :mod:`probe.chart.svg`), :mod:`.watch` (writing it, once or as runs grow).
"""
MAX_STEPS = 6                       # steps shown per probe (the CLI's default too: this module is cheap to import)
SLIDER_MAX = 64                     # figures behind a probe's step slider at most, log-spaced (0: every snapshot)

_LAZY = {"Report": "page", "Section": "sources", "Budget": "sources", "RunSource": "sources", "pick_steps": "sources",
         "check_out": "watch", "report": "watch", "watch": "watch", "Failed": "watch"}
__all__ = ["MAX_STEPS", "SLIDER_MAX", *_LAZY]


def __getattr__(name):   # PEP 562: numpy, jinja2 and matplotlib (colour maps) only when a page is made
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
