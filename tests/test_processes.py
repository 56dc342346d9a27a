"""``perfkit.processes``: worker pools start from a ``__main__`` without ``__spec__`` (a Jupyter kernel,
after ``%reset`` too), as the ranks report does in a reused kernel (test_default_reports)."""
import sys
import types

from perfkit.processes import give_main_a_spec


def test_a_main_without_spec_gets_a_scripts_none_and_a_real_spec_is_kept(monkeypatch):
    kernel_main = types.ModuleType("__main__")  # what %reset leaves: no __spec__ attribute at all
    del kernel_main.__spec__
    monkeypatch.setitem(sys.modules, "__main__", kernel_main)
    give_main_a_spec()
    assert kernel_main.__spec__ is None
    script_main = types.ModuleType("__main__")
    script_main.__spec__ = spec = object()
    monkeypatch.setitem(sys.modules, "__main__", script_main)
    give_main_a_spec()
    assert script_main.__spec__ is spec
