"""THE MATH of each probe: pure functions on arrays returning a :class:`~.base.Result`.

No file I/O and no import of the rest of the package but :mod:`probe.errors` (a test checks it);
:mod:`probe.api` reads the arrays and calls these. Numerics shared by several probes (unit rows, the
cosine matrix, rank and linear correlation, exp-entropy) live in :mod:`.stats`; the result
contract (``summary()``, ``rows()``, strict ``to_dict()``, ``to_frame()``, ``warnings``, and the
``Results`` list every probe returns) in :mod:`.base`.
To add a probe: a module here with its function and Result, a function in :mod:`probe.api` (the
module of what it reads) and an entry in :mod:`probe.registry` (CONTRIBUTING.md, "Adding a probe").
"""
