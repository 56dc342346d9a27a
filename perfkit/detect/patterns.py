"""AST patterns of the ``check-in-forward`` and ``where-nonzero`` rules (catalog in
``perfkit.detect.rules.RULES``); ``perfkit.detect.checker`` calls them while it walks a file.

"Inside forward" is a function named ``forward`` or one that a ``forward`` in the same file calls
directly (``self._check_nan(x)``), one level deep: a NaN check factored into a helper still runs
once per forward pass. A NaN check is a NaN/Inf test (``torch.isnan``/``isinf``/``isfinite``/
``isposinf``/``isneginf``, function or method form; numpy's and math's are host data) reduced to
one bool by ``any``/``all``.
"""
from __future__ import annotations

import ast

from .rules import HOST_MODULES, qualname

FORWARD = "forward"
NAN_TESTS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf"})
REDUCTIONS = frozenset({"any", "all"})


def forward_functions(tree: ast.AST) -> frozenset[str]:
    """``forward`` plus the helpers ``forward`` calls directly (``self._check(x)``, ``check(x)``):
    a check factored into a helper still runs once per forward pass. One level deep."""
    names = {FORWARD}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == FORWARD:
            names.update(_own_calls(node))
    return frozenset(names)


def _own_calls(function: ast.AST) -> set[str]:
    """Names of ``self.name(...)`` and ``name(...)`` calls in ``function`` (not ``x.any()``: a
    method of some other object is not this file's helper)."""
    out = set()
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Name):
            out.add(call.func.id)
        elif isinstance(call.func, ast.Attribute) and getattr(call.func.value, "id", "") == "self":
            out.add(call.func.attr)
    return out


def is_one_arg_where(call: ast.Call, aliases: dict[str, str]) -> bool:
    """``torch.where(mask)`` (or ``condition=mask``): the nonzero form, not ``where(mask, a, b)``."""
    if qualname(call.func, aliases) != "torch.where":
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False
    return len(call.args) + len(call.keywords) == 1


def _reduction(node: ast.AST, aliases: dict[str, str]) -> ast.AST | None:
    """The operand of ``x.any()``/``x.all()``/``torch.any(x)``/``torch.all(x)``, else None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in REDUCTIONS and not node.args:
        receiver = node.func.value
        return None if qualname(receiver, aliases).startswith(HOST_MODULES) else receiver
    if qualname(node.func, aliases) in {f"torch.{r}" for r in REDUCTIONS} and node.args:
        return node.args[0]
    return None


def _nan_test(node: ast.AST, aliases: dict[str, str]) -> bool:
    """``torch.isnan(x)`` or ``x.isnan()`` (numpy's and math's ``isnan`` are host data)."""
    if not isinstance(node, ast.Call):
        return False
    qual = qualname(node.func, aliases)
    if qual.startswith("torch."):
        return qual.rsplit(".", 1)[-1] in NAN_TESTS
    return isinstance(node.func, ast.Attribute) and node.func.attr in NAN_TESTS and not qual.startswith(
        HOST_MODULES + ("math.",))


def is_nan_check(test: ast.AST, aliases: dict[str, str]) -> bool:
    """A condition that reduces a NaN/Inf test to one bool: ``torch.isnan(x).any()``,
    ``not torch.isfinite(x).all()``, ``torch.any(x.isinf())``, optionally read with ``.item()``
    or ``bool()``, combined with ``and``/``or``."""
    if isinstance(test, ast.BoolOp):
        return any(is_nan_check(v, aliases) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return is_nan_check(test.operand, aliases)
    operand = _reduction(_unwrap_read(test, aliases), aliases)
    return operand is not None and any(_nan_test(n, aliases) for n in ast.walk(operand))


def _unwrap_read(node: ast.AST, aliases: dict[str, str]) -> ast.AST:
    """``x.item()`` / ``bool(x)`` -> ``x``; anything else unchanged."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item" \
            and not node.args:
        return node.func.value
    if isinstance(node, ast.Call) and qualname(node.func, aliases) == "bool" and len(node.args) == 1:
        return node.args[0]
    return node


def is_reduction_read(call: ast.Call, aliases: dict[str, str]) -> bool:
    """``x.any().item()``, ``torch.all(m).item()`` or ``bool(x.any())``: a reduction read to the host."""
    inner = _unwrap_read(call, aliases)
    return inner is not call and _reduction(inner, aliases) is not None
