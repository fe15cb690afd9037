"""The math of each probe: pure functions on arrays returning small result objects.

No file I/O here; :mod:`probe.api` reads snapshots and calls these.
"""
