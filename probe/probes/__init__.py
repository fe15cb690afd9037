"""The built-in probes, one module each: the API function (its math in :mod:`probe.analyses`), the
terminal detail table, the chart (panels the report and ``--plot`` both draw: :mod:`probe.chart`) and
the :class:`probe.registry.Probe` that declares them. :func:`probe.registry.probes` finds them here, in this order (the order of
``probe --help``, batch tables, report sections and the reference page)."""

BUILTIN = ("similarity", "cohesion", "cka", "pca", "align", "condense", "theory", "ood", "attention", "bias", "spectrum",
           "rank", "rank_trajectory", "regime", "regime_widths", "gamma", "norms", "sinks", "dynamics", "tokens")
