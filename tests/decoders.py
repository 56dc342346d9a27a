"""The two decoders of a chunk of events, compared (issue 52): the C extension's columns and the pure-Python
path's (msgspec), which must give identical tables, drops, warnings and failures.

:func:`assert_same_decoding` compares the results of one chunk; :func:`watch_decoders` makes every chunk that a
test decodes in this process (or in workers forked from it) decode three times: as the loader chooses (what the
test gets), again by the C extension, and by the pure path, the last two compared."""
from __future__ import annotations

import pandas as pd

from perfkit.trace.loader import decode, native
from perfkit.trace.loader.decode import ChunkFailure


def assert_same_decoding(ours, theirs, data=b"") -> None:
    """``ours`` and ``theirs`` (a ColumnBuilder or ChunkFailure each, consumed) say the same of ``data``."""
    where = f" of the chunk {bytes(data[:300])!r}"
    assert type(ours) is type(theirs), f"{ours!r} vs {theirs!r}{where}"
    if isinstance(ours, ChunkFailure):
        assert ours == theirs, where
        return
    assert (ours.n_seen, ours.skipped_phases, ours.arg_ranks) == (theirs.n_seen, theirs.skipped_phases,
                                                                 theirs.arg_ranks), where
    assert ours.drops.counts == theirs.drops.counts and repr(ours.drops.first) == repr(theirs.drops.first), where
    assert ours.flow_drops.counts == theirs.flow_drops.counts, where
    assert repr(ours.flow_drops.first) == repr(theirs.flow_drops.first), where
    for mine, other in zip(ours.frames(), theirs.frames()):
        pd.testing.assert_frame_equal(mine, other, check_exact=True, check_categorical=True, obj=f"columns{where}")


def watch_decoders(monkeypatch) -> None:
    """Every chunk decoded while the test runs is decoded by both paths and compared (nothing to compare where
    the C extension is not built)."""
    if not native.built():
        return
    chosen = decode._decode

    def both(data):
        result = chosen(data)
        if native.chosen() == "native" and not isinstance(native.decode(data), str):
            assert_same_decoding(decode._built(native.decode(data)), decode.decode_python(data), data)
        return result

    monkeypatch.setattr(decode, "_decode", both)
