"""AST patterns of the ``check-in-forward``, ``where-nonzero``, ``nonzero-in-step`` and
``bool-mask-index`` rules (catalog in ``perfkit.detect.sync_rules.RULES``); ``perfkit.detect.checker``
calls them while it walks a file.

"Inside forward" is a function named ``forward`` or one that a ``forward`` in the same file calls
directly (``self._check_nan(x)``), one level deep: a NaN check factored into a helper still runs
once per forward pass. A NaN check is a NaN/Inf test (``torch.isnan``/``isinf``/``isfinite``/
``isposinf``/``isneginf``, function or method form; numpy's and math's are host data) reduced to
one bool by ``any``/``all``. A mask is a boolean tensor expression written in the file (a
comparison, a NaN test, ``logical_*``, ``.bool()``), or a name bound to one in the same function;
a parameter called ``mask`` is not guessed to be one (it may hold indices).

"In a loop" reaches into the file's own functions: a function that a ``for``/``while`` body calls
(``self.train_step(batch)``), directly or through other functions of the file, runs once per
iteration, so its ``.item()`` is found as in the loop (``loop_callees``).
"""
from __future__ import annotations

import ast
from collections import deque

from .sync_rules import HOST_MODULES, keyword, qualname

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
    return {name for call in ast.walk(function) if (name := own_call(call))}


def own_call(node: ast.AST) -> str:
    """``name`` for a call ``name(...)`` or ``self.name(...)``, else ""."""
    if not isinstance(node, ast.Call):
        return ""
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "self":
        return node.func.attr
    return ""


def loop_callees(tree: ast.AST) -> dict[str, int]:
    """Function name -> line of the ``for``/``while`` loop that calls it, for every function of
    this file that a loop body (or a ``while`` test) calls, directly or through other functions of
    the file (``self.step(b)``, ``step(b)``): what it does runs once per iteration. Names only, as
    ``forward_functions``; a call inside a ``def`` nested in the loop is not the loop's call."""
    defs, direct, calls = _calls_by_place(tree)
    found = {name: line for name, line in direct.items() if name in defs}
    queue = deque(found)
    while queue:
        name = queue.popleft()
        for callee in sorted(set().union(*(calls.get(fn, set()) for fn in defs[name]))):
            if callee in defs and callee not in found:
                found[callee] = found[name]
                queue.append(callee)
    return found


def _calls_by_place(tree: ast.AST) -> tuple[dict, dict, dict]:
    """(name -> its ``def`` nodes, called name -> first loop line calling it, ``def`` node -> names
    it calls); iterative, so any nesting depth is safe."""
    defs, direct, calls = {}, {}, {}
    stack = [(tree, 0, None)]
    while stack:
        node, loop, function = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, []).append(node)
            loop, function = 0, node
        name = own_call(node)
        if name:
            if loop:
                direct[name] = min(direct.get(name, loop), loop)
            if function is not None:
                calls.setdefault(function, set()).add(name)
        looped = node.body + [node.test] if isinstance(node, ast.While) else (
            node.body if isinstance(node, (ast.For, ast.AsyncFor)) else [])
        inside = {id(c) for c in looped}
        stack.extend((child, node.lineno if id(child) in inside else loop, function)
                     for child in ast.iter_child_nodes(node))
    return defs, direct, calls


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


# --- nonzero-in-step and bool-mask-index --------------------------------------------------------
# Ops whose output size is the number of true elements (PyTorch docs: nonzero, argwhere,
# masked_select synchronize with the device to size their output).
NONZERO_OPS = frozenset({"nonzero", "argwhere", "masked_select"})
_ORDER_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_MASK_FUNCS = NAN_TESTS | frozenset({
    "logical_and", "logical_or", "logical_not", "logical_xor", "gt", "lt", "ge", "le", "eq", "ne",
    "greater", "less", "greater_equal", "less_equal", "not_equal", "isclose", "isin", "signbit"})
_MASK_METHODS = _MASK_FUNCS - {"isin"} | {"bool"}


def nonzero_receiver(call: ast.Call, aliases: dict[str, str]) -> ast.AST | None:
    """The tensor of ``torch.nonzero(x)``/``x.nonzero()`` (also ``argwhere``, ``masked_select``);
    None for anything else, numpy's ``np.nonzero`` included. A method's receiver is returned for the
    caller to judge (``arr.nonzero()`` on host data is numpy's)."""
    qual = qualname(call.func, aliases)
    if qual.startswith("torch.") and qual.rsplit(".", 1)[-1] in NONZERO_OPS:
        return call.args[0] if call.args else keyword(call, "input")
    if isinstance(call.func, ast.Attribute) and call.func.attr in NONZERO_OPS and not qual.startswith(HOST_MODULES):
        return call.func.value
    return None


def mask_operands(node: ast.AST, masks, aliases: dict[str, str]) -> list[ast.AST] | None:
    """The operands that decide whether ``node`` is a boolean tensor, when ``node`` has the form of a
    mask: a comparison (``x > 0``), a NaN/Inf test, ``torch.logical_*``/``gt``/``eq``-style calls or
    methods, ``.bool()``, ``.any(dim)``/``.all(dim)``, ``&``/``|``/``^``/``~`` of a mask, a row of a
    mask (``m[:, 0]``) or a name in ``masks`` (bound to a mask in this function). None when it has
    none of these forms (an integer index, a slice, a plain name). Constants are not operands."""
    if isinstance(node, ast.Name):
        return [node] if node.id in masks else None
    if isinstance(node, ast.Compare):
        if not all(isinstance(op, _ORDER_OPS) for op in node.ops):
            return None
        return _non_constant([node.left, *node.comparators]) or None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return mask_operands(node.operand, masks, aliases)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        sides = [mask_operands(s, masks, aliases) for s in (node.left, node.right)]
        if sides == [None, None]:
            return None
        return [o for side, s in zip(sides, (node.left, node.right))
                for o in (side if side is not None else _non_constant([s]))]
    if isinstance(node, ast.Subscript):
        return mask_operands(node.value, masks, aliases)
    if isinstance(node, ast.Call):
        return _mask_call(node, aliases)
    return None


def _mask_call(call: ast.Call, aliases: dict[str, str]) -> list[ast.AST] | None:
    qual = qualname(call.func, aliases)
    if qual.startswith("torch."):
        if qual.rsplit(".", 1)[-1] not in _MASK_FUNCS:
            return None
        return _non_constant(call.args) or None
    if not isinstance(call.func, ast.Attribute) or qual.startswith(HOST_MODULES + ("math.",)):
        return None
    method = call.func.attr
    if method in _MASK_METHODS or (method in REDUCTIONS and (call.args or call.keywords)):
        return [call.func.value]
    return None


def _non_constant(nodes) -> list[ast.AST]:
    def constant(n):
        return isinstance(n, ast.Constant) or (isinstance(n, ast.UnaryOp) and isinstance(n.operand, ast.Constant))

    return [n for n in nodes if not constant(n)]


def index_items(subscript: ast.Subscript) -> list[ast.AST]:
    """The index expressions of ``x[a]`` / ``x[a, b]`` (slices included, for the caller to skip)."""
    index = subscript.slice
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]
