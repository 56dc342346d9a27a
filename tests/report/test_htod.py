"""The htod report's tables: sizes in units, times per copy in us, never an exponent (issue 37)."""
import pandas as pd

from perfkit.report.htod import sweep_table, with_sizes
from perfkit.results import html_table


class FakeSweep:
    available = False

    def host_frame(self):
        return pd.DataFrame({"size_bytes": [4096, 16777216], "mode": ["host_memcpy"] * 2,
                             "median_s": [5.45e-07, 0.00174], "gbps": [7.521, 9.643], "samples": [5, 5]})


def test_sweep_table_reads_sizes_and_microseconds():
    table = sweep_table(FakeSweep())
    assert table["size"].tolist() == ["4 KiB", "16 MiB"]
    html = html_table(table)
    assert "0.545" in html and "1,740" in html and "e-0" not in html


def test_copies_table_shows_a_size_not_raw_bytes():
    frame = pd.DataFrame({"direction": ["HtoD"], "memory": ["pageable"], "count": [3], "bytes": [201326592]})
    assert with_sizes(frame).to_dict("records") == [{"direction": "HtoD", "memory": "pageable", "count": 3,
                                                     "size": "201.3 MB"}]
    assert with_sizes(frame.drop(columns="bytes")).columns.tolist() == ["direction", "memory", "count"]
