"""perfkit.trace.loader.split's folder rule: one rank's file plain and gzipped is refused, not read as two ranks."""
from __future__ import annotations

import gzip

import pytest

from perfkit.cli import main
from perfkit.errors import TraceError
from perfkit.trace.loader.split import refuse_plain_and_gzip
from tracebuilder import TraceBuilder


@pytest.mark.parametrize("names, refused", [
    (["rank0.json", "rank0.json.gz"], True),
    (["rank0.json", "rank1.json.gz"], False),
    (["rank0.json.gz", "rank1.json.gz"], False),
    (["rank0.json"], False),
])
def test_plain_and_gzip_table(tmp_path, names, refused):
    entries = [tmp_path / n for n in names]
    if refused:
        with pytest.raises(TraceError, match="holds rank0.json and rank0.json.gz"):
            refuse_plain_and_gzip(tmp_path, entries)
    else:
        assert refuse_plain_and_gzip(tmp_path, entries) == entries


def test_one_trace_plain_and_gzipped_in_a_folder_is_refused_not_counted_twice(tmp_path, capsys):
    b = TraceBuilder()
    b.step(0, 0, 100)
    plain = b.write(tmp_path / "rank0.json")
    (tmp_path / "rank0.json.gz").write_bytes(gzip.compress(plain.read_bytes()))
    for command in (["summary", str(tmp_path)], ["sql", "SELECT count(*) FROM events", str(tmp_path)]):
        assert main(command) == 2
        assert "holds rank0.json and rank0.json.gz" in capsys.readouterr().err
