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


BAD = ["0", "-5", "lots", "1.5", "4GB", "1e9", str(2**62 + 1), str(2**64), "9" * 5000]


@pytest.mark.parametrize("raw", BAD, ids=lambda raw: raw[:12])
@pytest.mark.parametrize("limit", ALL, ids=lambda lim: lim.env)
def test_every_unusable_override_of_every_limit_is_refused_naming_it(limit, raw, monkeypatch):
    monkeypatch.setenv(limit.env, raw)
    with pytest.raises(ParameterError, match=f"{limit.env}=.*whole number of {limit.unit} from 1 to 2\\*\\*62"):
        limit.value()


GZ_TRACE = "{gz}"
# The command that reads each budget, on the shipped gzip trace: a malformed variable is one line naming it,
# wherever it is read (PERFKIT_MAX_DECOMPRESSED_BYTES is read by the gzip reader's thread: the error was lost
# there, and the trace reported as "file is empty").
COMMANDS = {
    "PERFKIT_MAX_DECOMPRESSED_BYTES": ["summary", "--no-cache", GZ_TRACE],
    "PERFKIT_MAX_NESTING_DEPTH": ["summary", "--no-cache", GZ_TRACE],
    "PERFKIT_MAX_METADATA_BYTES": ["summary", "--no-cache", GZ_TRACE],
    "PERFKIT_MAX_EVENT_BYTES": ["summary", "--no-cache", GZ_TRACE],
    "PERFKIT_MAX_TABLE_BYTES": ["summary", "--no-cache", GZ_TRACE],
    "PERFKIT_SCAN_MAX_FILE_BYTES": ["scan", ROOT / "perfkit" / "limits.py"],
    "PERFKIT_SQL_MAX_ROWS": ["sql", "SELECT 1", GZ_TRACE],
    "PERFKIT_SQL_TIMEOUT_S": ["sql", "SELECT 1", GZ_TRACE],
}


@pytest.fixture(scope="module")
def gz(tmp_path_factory):
    import gzip

    from fuzzkit import event, kineto_text

    path = tmp_path_factory.mktemp("gz") / "t.json.gz"
    path.write_bytes(gzip.compress(kineto_text([event(cat="user_annotation", name="ProfilerStep#1", dur=500)])))
    return path


@pytest.mark.parametrize("raw", ["lots", str(2**64)])
@pytest.mark.parametrize("env", sorted(COMMANDS))
def test_a_malformed_budget_variable_is_one_line_from_the_command_that_reads_it(env, raw, gz, monkeypatch):
    from fuzzkit import run_main

    monkeypatch.setenv(env, raw)
    out = run_main(*(str(a).format(gz=gz) for a in COMMANDS[env]))
    out.assert_clean(codes=(2,))
    assert env in out.err and "from 1 to 2**62" in out.err and len(out.err.strip().splitlines()) == 1, out.why()


def test_the_snapshot_budget_variable_is_refused_naming_it(tmp_path, monkeypatch):
    import pickle

    from perfkit.analysis.memory_leak.memory_snapshot import load_memory_snapshot

    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": []}))
    monkeypatch.setenv("PERFKIT_SNAPSHOT_MAX_ITEMS", "lots")
    with pytest.raises(ParameterError, match="PERFKIT_SNAPSHOT_MAX_ITEMS"):
        load_memory_snapshot(path)
    assert set(COMMANDS) | {"PERFKIT_SNAPSHOT_MAX_ITEMS"} == {lim.env for lim in ALL}
