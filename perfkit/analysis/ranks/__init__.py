"""Several ranks of one job: per-rank step tables (``tables``), collective arrival times
(``collectives``), stragglers (``stragglers``), the pandas/Dask engines that read many files
(``engines``) and the comparison itself (``combine``)."""
