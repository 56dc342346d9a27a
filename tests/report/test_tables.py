"""Small report tables in people's units (``report.tables``)."""
import pandas as pd
import pytest

from perfkit.report import tables
from perfkit.report.tables import bytes_text, machine_table


class FakeEnv:
    def to_frame(self):
        return pd.DataFrame([("ram", "total_bytes", "25276510208"), ("ram", "available_bytes", "n/a"),
                             ("cpu", "logical", "2"), ("env", "SOME_bytes", "not a number")],
                            columns=["section", "key", "value"])


def test_machine_table_shows_ram_in_gib_not_raw_bytes():
    rows = machine_table(FakeEnv()).to_dict("records")
    assert rows == [{"section": "ram", "key": "total", "value": "23.54 GiB"},
                    {"section": "ram", "key": "available_bytes", "value": "n/a"},
                    {"section": "cpu", "key": "logical", "value": "2"},
                    {"section": "env", "key": "SOME_bytes", "value": "not a number"}]


@pytest.mark.parametrize("n, text", [(812, "812 B"), (4096, "4 KiB"), (201326592, "192 MiB"), (2**40, "1,024 GiB")])
def test_bytes_text(n, text):
    assert bytes_text(n) == text


def test_monitor_table_reads_bytes_in_mib():
    from perfkit.bench.monitor import MonitorResult

    rows = ({"time_s": 0.0, "cpu_process_percent": 50.0, "cpu_system_percent": 80.0, "rss_bytes": 512 * 2**20},
            {"time_s": 0.1, "cpu_process_percent": 70.0, "cpu_system_percent": 90.0, "rss_bytes": 1024 * 2**20})
    table = tables.monitor_table(MonitorResult(0.1, rows, gpu_reason="no NVIDIA driver or GPU (NVML: x)"))
    rss = table.set_index("metric").loc["rss (MiB)"]
    assert rss["mean"] == 768.0 and rss["max"] == 1024.0 and rss["samples"] == 2
    assert table.set_index("metric").loc["cpu_process_percent", "max"] == 70.0
