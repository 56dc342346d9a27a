"""Small report tables in people's units (``report.tables``)."""
import pandas as pd
import pytest

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
