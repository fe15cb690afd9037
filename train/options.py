"""What the commands of probe-train share: Click's settings and the --preset option's help and check."""
from __future__ import annotations

from probe.errors import unknown

from .config import PRESETS

CONTEXT = {"help_option_names": ["--help"], "max_content_width": 100}   # probe's (probe/cli)

PRESET_HELP = (f"starting configuration: {', '.join(PRESETS)} (probe-train presets says what each is for; "
               "--print-config shows its values)")


def known_preset(_ctx, _param, value: str) -> str:
    """--preset's check as it is parsed: a mistyped name is the error, before a missing --out."""
    if value not in PRESETS:
        raise unknown("preset", value, PRESETS)
    return value
