"""Writers of files other tools open: annotated traces for Perfetto and chrome://tracing (``annotate``,
``perfkit annotate``) and loaded traces as a Parquet dataset for DuckDB, Dask and Spark (``parquet``,
``perfkit export``)."""
