"""What bounds a training step: the verdict (``diagnosis``, with ``cpu_bound``'s host view, ``rules``,
``findings``, ``layers`` and ``warmup``), the critical path across host threads (``critical_path``
over ``lanes``), the GPU's idle gaps (``gaps``), host hotspots (``hotspots``) and the one-sentence
anatomy that ties them together (``anatomy``)."""
