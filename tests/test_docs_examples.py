"""The code examples of the docs pages that teach an API run as written: each page's ```python blocks in
order, in one namespace, as a reader pastes them. The figures in their comments are illustrative (they
depend on the machine); what is checked is that the examples run and state what the page says they do."""
import re

import pytest

from conftest import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PAGES = ("compare.md", "leaks.md")


def run_page(name: str) -> dict:
    namespace: dict = {"__name__": f"docs_{name.removesuffix('.md')}"}
    blocks = BLOCK.findall((ROOT / "docs" / name).read_text(encoding="utf-8"))
    assert blocks, f"docs/{name} has no python example"
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/{name} block {i + 1}", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", PAGES)
def test_each_docs_page_of_an_api_runs_its_examples(name):
    run_page(name)


def test_the_compare_page_states_the_conclusion_its_result_states(capsys):
    ab = run_page("compare.md")["ab"]
    printed = capsys.readouterr().out
    assert str(ab) in printed and ab.conclusion in printed
    assert ab.conclusion in ({ab.verdict} if not ab.unreliable else {f"inconclusive: re-run on a quiet machine "
                                                                     f"({ab.unreliable})"})


def test_the_leaks_page_finds_its_leak_and_not_its_clean_step():
    found = run_page("leaks.md")
    assert (found["leak"].verdict, found["clean"].verdict) == ("leak", "no leak")
    assert found["lines"]["location"].iloc[0].startswith("docs/leaks.md block 1")
