"""The AST pass of the static sync scanner: ``check_tree(tree)`` lists every rule match in one
parsed file, in source order; ``perfkit.detect.static`` reads the files, applies the ignore
comments and reports.

One visitor walks the file once, binding the tensor-or-not kind of each name as it goes
(``rules.ExprKinds``) and recording ``(line, end_line, rule id, message)`` per match. In a file
that never imports torch, method names (``mask.any()``, ``df.mean()``) and ``loss``-like names
are not taken for tensors. ``no-grad-inference`` fires for ``torch.no_grad()`` in functions whose
name has an inference word (eval, evaluate, predict, act, plan, inference, infer, rollout,
validate, generate) and no ``.backward()``, and for every ``torch.no_grad()`` of a file that
never calls ``.backward()`` or ``autograd.grad`` (an inference script). A function of the file
that a loop calls (``patterns.loop_callees``) is checked as inside that loop, and its loop findings
say so ("in `train_step`, called from the loop at line 12").
"""
from __future__ import annotations

import ast

from . import patterns as P
from . import sync_rules as R

Hit = tuple[int, int, str, str]
# Rules that fire only once per loop iteration (or `forward` pass): the ones a loop's callee inherits.
LOOP_RULES = frozenset({"item-in-loop", "sync-in-loop", "blocking-to-device", "nonzero-in-step", "bool-mask-index"})


def check_tree(tree: ast.AST) -> list[Hit]:
    """``(line, end_line, rule id, message)`` of every rule match in ``tree`` (one parsed file),
    in source order; a rule may match a line more than once."""
    checker = _Checker(R.import_aliases(tree), _has_backward(tree), P.forward_functions(tree), P.loop_callees(tree))
    checker.visit(tree)
    return checker.hits


def _has_backward(tree: ast.AST) -> bool:
    """True if ``tree`` calls ``.backward()`` or ``autograd.grad``: it trains, so no_grad may guard autograd."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "backward" or (node.func.attr == "grad" and _name_of(node.func.value) == "autograd"):
                return True
    return False


def _name_of(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


class _Checker(ast.NodeVisitor):
    """One pass in source order: binds name kinds as it goes and records (line, end, rule, message)."""

    def __init__(self, aliases: dict[str, str], file_trains: bool, forward_names: frozenset[str] = frozenset(),
                 loop_callees: dict[str, int] | None = None):
        self.aliases = aliases
        self.forward_names = forward_names
        self.loop_callees = loop_callees or {}
        self.caller: tuple[str, int] | None = None  # (function, loop line) while in a function a loop calls
        self.kinds = R.ExprKinds(aliases)
        self.file_trains = file_trains
        self.loops = 0
        self.functions: list[tuple[str, bool]] = []
        self.masks: list[set[str]] = [set()]  # names bound to a boolean-mask expression, per function
        self.hits: list[Hit] = []

    def hit(self, node: ast.AST, rule: str, message: str) -> None:
        if self._only_called_from_loop(rule):
            message += f" (in `{self.caller[0]}`, called from the loop at line {self.caller[1]})"
        self.hits.append((node.lineno, getattr(node, "end_lineno", None) or node.lineno, rule, message))

    def _only_called_from_loop(self, rule: str) -> bool:
        """The match is per iteration only because a loop calls this function (not its own loop, not `forward`)."""
        in_forward = rule in ("nonzero-in-step", "bool-mask-index") and self._in_forward()
        return self.caller is not None and self.loops == 1 and rule in LOOP_RULES and not in_forward

    def qual(self, node: ast.AST) -> str:
        return R.qualname(node, self.aliases)

    # scopes and loops -------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        self.functions.append((node.name, _has_backward(node)))
        for d in node.decorator_list:
            self.visit(d)
            if self.qual(d.func if isinstance(d, ast.Call) else d) in R.NO_GRAD:
                self._no_grad(d, node.name)
        self.kinds.push()
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self.kinds.bind(ast.Name(a.arg), self.kinds.annotation_kind(a.annotation))
        saved = self.loops, self.caller
        line = self.loop_callees.get(node.name)
        self.loops, self.caller = (1, (node.name, line)) if line else (0, None)
        self.masks.append(set())
        for stmt in node.body:
            self.visit(stmt)
        self.masks.pop()
        self.functions.pop()
        self.loops, self.caller = saved
        self.kinds.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for d in node.decorator_list + node.bases:
            self.visit(d)
        self.kinds.push()
        for stmt in node.body:
            self.visit(stmt)
        self.kinds.pop()

    def visit_For(self, node):
        self.visit(node.iter)
        self.kinds.bind(node.target, self.kinds.element_kind(node.iter))
        self._in_loop(node.body)
        for stmt in node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_While(self, node):
        self.loops += 1
        self._condition(node.test)
        self.visit(node.test)
        self.loops -= 1
        self._in_loop(node.body)
        for stmt in node.orelse:
            self.visit(stmt)

    def _in_loop(self, body):
        self.loops += 1
        for stmt in body:
            self.visit(stmt)
        self.loops -= 1

    def _comprehension(self, node, *elts):
        self.visit(node.generators[0].iter)
        self.loops += 1
        for i, gen in enumerate(node.generators):
            if i:
                self.visit(gen.iter)
            self.kinds.bind(gen.target, self.kinds.element_kind(gen.iter))
            for cond in gen.ifs:
                self._condition(cond)
                self.visit(cond)
        for elt in elts:
            self.visit(elt)
        self.loops -= 1

    def visit_ListComp(self, node):
        self._comprehension(node, node.elt)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, node.key, node.value)

    # bindings ----------------------------------------------------------------------------------
    def visit_Assign(self, node):
        self.visit(node.value)
        kind = self.kinds.kind(node.value)
        for t in node.targets:
            self.visit(t)
            self.kinds.bind(t, kind)
            self._bind_mask(t, node.value)
            if isinstance(t, ast.Subscript) and kind == "tensor":  # x[mask] = 0.0 is a masked_fill, no sync
                self._mask_index(t)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
        kind = self.kinds.annotation_kind(node.annotation)
        self.kinds.bind(node.target, kind or (self.kinds.kind(node.value) if node.value else None))
        self._bind_mask(node.target, node.value)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            current = self.kinds.lookup(node.target.id, False)
            self.kinds.bind(node.target, self.kinds.merge(current, self.kinds.kind(node.value)))
        elif isinstance(node.target, ast.Subscript):  # x[mask] += 1 reads x[mask] first
            self._mask_index(node.target)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self.kinds.bind(node.target, self.kinds.kind(node.value))
        self._bind_mask(node.target, node.value)

    def _bind_mask(self, target, value):
        if not isinstance(target, ast.Name):
            return
        if value is not None and P.mask_operands(value, self.masks[-1], self.aliases) is not None:
            self.masks[-1].add(target.id)
        else:
            self.masks[-1].discard(target.id)

    def visit_With(self, node):
        for item in node.items:
            self.visit(item.context_expr)
            expr = item.context_expr
            if isinstance(expr, ast.Call) and self.qual(expr.func) in R.NO_GRAD:
                self._no_grad(expr, self.functions[-1][0] if self.functions else "")
            if item.optional_vars is not None:
                self.kinds.bind(item.optional_vars, None)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    # conditions ------------------------------------------------------------------------------
    def visit_If(self, node):
        self._condition(node.test)
        self.generic_visit(node)

    visit_Assert = visit_IfExp = visit_If

    def _in_forward(self) -> bool:
        return any(name in self.forward_names for name, _ in self.functions)

    def _condition(self, test):
        if self._in_forward() and P.is_nan_check(test, self.aliases):
            self.hit(test, "check-in-forward", "a NaN/Inf check in `forward`: one sync per forward pass")
        elif self._syncs_as_bool(test):
            self.hit(test, "tensor-condition", "a tensor is used as a condition: `__bool__` waits for the device")

    def _syncs_as_bool(self, test) -> bool:
        if isinstance(test, ast.BoolOp):
            return any(self._syncs_as_bool(v) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._syncs_as_bool(test.operand)
        if isinstance(test, ast.Call):
            qual = self.qual(test.func)
            if qual in R.SYNC_PREDICATES:
                return True
            if qual == "bool" and test.args:
                return self._syncs_as_bool(test.args[0])
        return self.kinds.is_tensor(test)

    # data-dependent shapes: nonzero and boolean-mask indexing ---------------------------------
    def _per_step(self) -> str:
        """Where the code runs once per step ("`forward`", "a loop"), or "" when it does not."""
        return "`forward`" if self._in_forward() else ("a loop" if self.loops else "")

    def _device_side(self, subject, operands=()) -> bool:
        """``subject`` (and the mask made of ``operands``: host only if all of them are) is not host
        data, and one of them is a tensor (or, in a file that imports torch, unknown)."""
        kinds = [self.kinds.kind(subject)]
        if operands:
            mask = [self.kinds.kind(n) for n in operands]
            kinds.append("tensor" if "tensor" in mask else ("host" if all(k == "host" for k in mask) else None))
        return "host" not in kinds and ("tensor" in kinds or self.kinds.guess)

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            self._mask_index(node)

    def _mask_index(self, node: ast.Subscript):
        where = self._per_step()
        if not where:
            return
        for item in P.index_items(node):
            operands = P.mask_operands(item, self.masks[-1], self.aliases)
            if operands is not None and self._device_side(node.value, operands):
                self.hit(node, "bool-mask-index", f"boolean-mask indexing in {where}: a nonzero, the host waits")
                return

    # calls -----------------------------------------------------------------------------------
    def visit_Call(self, node):
        self.generic_visit(node)
        qual = self.qual(node.func)
        if qual in R.LEGACY_CTORS:
            self.hit(node, "legacy-tensor-ctor", f"`{qual}(...)` copies on the host; the device copy then blocks")
        elif qual in R.OPTIMIZERS:
            self._optimizer(node, qual)
        elif qual == "print" or self._is_logging(node):
            self._printed(node, node.args)
        elif P.is_one_arg_where(node, self.aliases):
            self.hit(node, "where-nonzero", "one-argument `torch.where(mask)` is a nonzero: the host waits for the count")
        if self._in_forward() and P.is_reduction_read(node, self.aliases):
            self.hit(node, "check-in-forward", "an `.any()`/`.all()` read to the host in `forward`: one sync per forward pass")
        receiver = P.nonzero_receiver(node, self.aliases) if self._per_step() else None
        if receiver is not None and self._device_side(receiver):
            op = node.func.attr if isinstance(node.func, ast.Attribute) else self.qual(node.func).rsplit(".", 1)[-1]
            self.hit(node, "nonzero-in-step", f"`{op}` in {self._per_step()}: the host waits for the device to count")
        if isinstance(node.func, ast.Attribute):
            self._method(node, node.func.attr)

    def _method(self, node, method):
        receiver = node.func.value
        if method == "synchronize" and self.loops:
            self.hit(node, "sync-in-loop", "`synchronize()` inside a loop waits for the device every iteration")
        elif method in ("to", "cuda"):
            self._to_device(node, method, receiver)
        elif method in ("item", "cpu", "numpy", "tolist") and self.loops:
            if self.kinds.kind(receiver) == "tensor" or (self.kinds.guess and self.kinds.kind(receiver) != "host"):
                self.hit(node, "item-in-loop", f"`.{method}()` inside a loop reads the device every iteration")
        elif method == "format" and isinstance(receiver, ast.Constant):
            self._printed(node, node.args + [k.value for k in node.keywords])

    def _to_device(self, node, method, receiver):
        non_blocking = R.keyword(node, "non_blocking")
        if non_blocking is not None and not (isinstance(non_blocking, ast.Constant) and not non_blocking.value):
            return
        if isinstance(receiver, ast.Call) and self._host_ctor(receiver):
            self.hit(node, "legacy-tensor-ctor", "`torch.tensor(array).to(device)` copies twice; the device copy blocks")
            return
        if not self.loops:
            return
        if method == "to" and R.is_cpu_target(node):
            self.hit(node, "item-in-loop", "`.to('cpu')` inside a loop reads the device every iteration")
            return
        target = node.args[0] if node.args else R.keyword(node, "device")
        if method == "cuda" or R.looks_like_device(target):
            self.hit(node, "blocking-to-device", f"`.{method}(...)` without `non_blocking=True` inside a loop")

    def _host_ctor(self, call: ast.Call) -> bool:
        qual = self.qual(call.func)
        if qual in R.LEGACY_CTORS:
            return True
        literal = call.args and isinstance(call.args[0], (ast.List, ast.Tuple, ast.Constant))
        return qual == "torch.tensor" and bool(call.args) and not literal

    def _optimizer(self, node, qual):
        if any(k.arg is None for k in node.keywords) or R.keyword(node, "foreach") is not None:
            return
        fused = R.keyword(node, "fused")
        if fused is None or (isinstance(fused, ast.Constant) and not fused.value):
            self.hit(node, "optimizer-not-fused", f"`{qual.rsplit('.', 1)[-1]}` without `fused=True` or `foreach=`")

    def _is_logging(self, node) -> bool:
        if not isinstance(node.func, ast.Attribute):
            return False
        method, owner = node.func.attr, _name_of(node.func.value).lower()
        logs = method in ("debug", "info", "warning", "error", "critical", "exception", "log")
        return (logs and "log" in owner) or method in ("add_scalar", "add_scalars") or self.qual(node.func) == "wandb.log"

    def _printed(self, node, values):
        for value in values:
            parts = value.values if isinstance(value, ast.Dict) else [value]
            if any(self.kinds.is_tensor(p, guess_names=True) for p in parts if p is not None):
                self.hit(node, "print-tensor", "a tensor is printed or logged: formatting it waits for the device")
                return

    def visit_JoinedStr(self, node):
        self.generic_visit(node)
        for part in node.values:
            if isinstance(part, ast.FormattedValue) and self.kinds.is_tensor(part.value, guess_names=True):
                self.hit(node, "print-tensor", "a tensor is formatted in an f-string: that waits for the device")
                return

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            parts = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            if any(self.kinds.is_tensor(p, guess_names=True) for p in parts):
                self.hit(node, "print-tensor", "a tensor is %-formatted: that waits for the device")

    # no_grad ---------------------------------------------------------------------------------
    def _no_grad(self, node, function: str):
        trains = self.functions[-1][1] if self.functions else self.file_trains
        inference_name = bool(R.name_tokens(function) & R.INFERENCE_TOKENS)
        if (inference_name and not trains) or not self.file_trains:
            where = f"in `{function}`" if function else "at module level"
            self.hit(node, "no-grad-inference", f"`torch.no_grad()` {where}: `torch.inference_mode()` is cheaper")
