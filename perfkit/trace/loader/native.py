"""Which decoder reads a chunk's events: the C extension, or msgspec's typed decode.

The C extension (``perfkit/trace/loader/cdecoder.c``, built by ``pip install`` where a C compiler is
present) parses a chunk straight into columns (:class:`~perfkit.trace.loader.fields.NativeFields`),
several times cheaper an event than decoding it into msgspec structs and gathering their fields. It
reads only what it fully handles; a chunk holding anything else (a JSON error, a string where an id goes,
...) goes to msgspec, which gives the same tables or the exact error. ``PERFKIT_DECODER``: ``native`` or
``python`` forces one (``native`` where the extension is not built is an error); unset, the extension is
used when it is built.
"""
from __future__ import annotations

import os

from ...errors import ParameterError
from .fields import NativeFields

try:
    from . import cdecoder
except ImportError:  # built without a C compiler: the pure-Python path
    cdecoder = None

ENV = "PERFKIT_DECODER"
CHOICES = ("native", "python")
BUILD = ("reinstall perfkit where a C compiler and the Python headers are present (`pip install -e .`; "
         "Debian/Ubuntu: `apt install gcc python3-dev`), or build it in place: `python setup.py build_ext --inplace`")


def built() -> bool:
    """Whether the C extension is importable."""
    return cdecoder is not None


def chosen() -> str:
    """"native" or "python": ``$PERFKIT_DECODER`` if set, else native where built. Raises
    ParameterError for another value, and for native where the extension is not built."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted == "":
        return "native" if built() else "python"
    if wanted not in CHOICES:
        raise ParameterError(f"{ENV}={wanted!r}: the decoder is one of {', '.join(CHOICES)} (unset: native where "
                             "the C extension is built)")
    if wanted == "native" and not built():
        raise ParameterError(f"{ENV}=native, but perfkit's C extension (perfkit.trace.loader.cdecoder) is not "
                             f"built: {BUILD}; or unset {ENV} to use the pure-Python decoder")
    return wanted


def describe() -> str:
    """One line for ``perfkit --version``: the decoder in use."""
    try:
        name = chosen()
    except ParameterError as exc:
        return f"decoder: none ({exc})"
    if name == "native":
        return "decoder: native (C)"
    if built():
        return f"decoder: python ({ENV}=python; the C extension is built)"
    return "decoder: python (the C extension is not built: no compiler at install time)"


def decode(data) -> NativeFields | str:
    """The fields of the events in ``data`` (a JSON array of events, any buffer), or a sentence saying
    what the C extension does not handle in it (the chunk then goes to msgspec)."""
    decoded = cdecoder.decode(data)
    return decoded if isinstance(decoded, str) else NativeFields(decoded)
