"""CUDA memory snapshots: a safe pickle reader (``reader``), one snapshot's blocks, segments and
top allocation sites (``memory_snapshot``), and growth across several (``growth``)."""
