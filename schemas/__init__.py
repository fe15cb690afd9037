"""The versioned contract of the snapshot file format.

``snapshot-v1.json`` is the single source of dataset paths, dtypes and
dimension names; :mod:`probe.format` reads and writes by it rather than repeating them.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

SNAPSHOT_SCHEMA_FILE = "snapshot-v1.json"


@lru_cache(maxsize=None)
def snapshot_schema() -> dict:
    """The snapshot schema as a dict (parsed once)."""
    text = resources.files(__name__).joinpath(SNAPSHOT_SCHEMA_FILE).read_text()
    return json.loads(text)


def path_of(entry: str, **fields) -> str:
    """HDF5 path of schema entry ``entry`` with its ``{placeholders}`` filled."""
    return snapshot_schema()["datasets"][entry]["path"].format(**fields)


def version_tuple(version: str) -> tuple[int, int]:
    major, _, minor = str(version).partition(".")
    return int(major), int(minor or 0)
