"""Writers of files other tools open: annotated traces for Perfetto and chrome://tracing."""
