"""Trace loading: files -> :class:`Trace` (events, flows, metadata, steps)."""
from .loader.load import load_trace
from .model import Trace, TraceFile

__all__ = ["load_trace", "Trace", "TraceFile"]
