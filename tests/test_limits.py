"""perfkit.limits: budgets read from the environment, refusals that say how to raise them, and a
docs page (docs/refusals.md, linked from the README) that documents every one."""
import pytest

from conftest import ROOT
from perfkit import limits
from perfkit.errors import ParameterError

ALL = [v for v in vars(limits).values() if isinstance(v, limits.Limit)]


def test_every_limit_is_documented_in_the_refusals_page():
    page = (ROOT / "docs" / "refusals.md").read_text()
    assert len(ALL) == 9
    for limit in ALL:
        assert f"`{limit.env}`" in page


@pytest.mark.parametrize("limit", ALL, ids=lambda lim: lim.env)
def test_default_and_override(limit, monkeypatch):
    monkeypatch.delenv(limit.env, raising=False)
    assert limit.value() == limit.default
    monkeypatch.setenv(limit.env, " 1_000 ")
    assert limit.value() == 1000
    assert f"more than the limit of 1,000 {limit.unit} ({limit.env})" in limit.refusal("x")
    assert f"{limit.env}=4000" in limit.refusal("x")


@pytest.mark.parametrize("raw", ["0", "-5", "lots", "1.5"])
def test_unusable_override_is_a_parameter_error(raw, monkeypatch):
    monkeypatch.setenv("PERFKIT_SNAPSHOT_MAX_ITEMS", raw)
    with pytest.raises(ParameterError, match="PERFKIT_SNAPSHOT_MAX_ITEMS"):
        limits.SNAPSHOT_MAX_ITEMS.value()


def test_span_spells_powers_of_two():
    assert limits.span(limits.TIME_RANGE_US) == "0..2**53-1"
    assert limits.span(limits.ID_RANGES["alloc_bytes"]) == "-2**63..2**63-1"
    assert limits.span((-1, 7)) == "-1..7"
