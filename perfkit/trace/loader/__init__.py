"""The loader's machinery: how trace files become the tables of a :class:`~perfkit.trace.Trace`.
``load`` (``load_trace``: paths, ranks, workers, the cache) drives the rest: ``stream`` (decompressed
bytes, block by block), ``parse`` (chunks of the ``traceEvents`` array; ``metadata`` for the JSON
around it, ``scan`` for exact cuts), ``handoff`` and ``workers`` (the processes that decode chunks),
``decode``, ``events``, ``columns`` and ``values`` (chunks into checked, typed columns), ``durations``
(B/E pairs), ``split`` (merged ranks) and ``cache`` (the columnar cache); ``shapes``, ``comm_args`` and
``memory_events`` read the arguments the events table leaves out, on demand. The concepts beside this
package (``model``, ``schema``, ``steps``, ``intervals``, ``nesting``, ``ancestry``, ``threads``,
``names``) work on loaded tables and never import it; analyses import those, and from here only the
on-demand readers and ``load.resolve_paths``.
"""
