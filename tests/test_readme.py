"""The README stays a newcomer's page: short, the two set-up commands as CI runs them, and a link to
every reference page in docs/ (each of which exists)."""
import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)\s]*)?\)")
SET_UP = ("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/perfkit run",
          "python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt && .venv/bin/python -m pytest -q")


def test_readme_is_under_250_lines():
    assert len(README.splitlines()) < 250


def test_readme_has_exactly_the_two_set_up_commands():
    assert [README.count(command) for command in SET_UP] == [1, 1]
    assert README.count("python3 -m venv") == 2


def test_readme_says_how_long_the_suite_takes_and_how_to_run_the_quick_subset():
    # 24.6 min measured on a clean clone, 2 cores, with the workers pyproject.toml starts
    assert "about 10 minutes on 2 cores" in README
    assert '"-n auto' in (ROOT / "pyproject.toml").read_text()
    assert "add `-n 0`" in README  # `-p no:xdist` would leave addopts' -n unrecognized
    assert '.venv/bin/python -m pytest -q -m "not slow"' in README
    assert ".venv/bin/python -m pytest -q -m quick" in README and "`QUICK`" in README  # tests/test_quick_subset.py
    assert "On a loaded machine it takes" in README and "`-v` names each test" in README


def test_readme_says_how_to_install_perfkit_into_ones_own_project():
    """Beside the clone's two commands, with the extra pyproject.toml defines."""
    assert 'pip install "/path/to/perfkit[workbook]"' in README and 'pip install -e ".[workbook]"' in README
    assert "\nworkbook = [" in (ROOT / "pyproject.toml").read_text()


def test_every_docs_link_in_the_readme_points_at_a_file():
    links = [link for link in LINK.findall(README) if link.startswith("docs/")]
    assert links
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = {link for link in LINK.findall(README) if link.startswith("docs/")}
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert pages - linked == set()


def test_links_between_docs_pages_point_at_files():
    broken = [(page.name, link) for page in DOCS.glob("*.md") for link in LINK.findall(page.read_text())
              if "://" not in link and not (page.parent / link).is_file()]
    assert broken == []
