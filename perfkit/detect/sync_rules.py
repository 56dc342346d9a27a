"""What counts as a sync point in source code: the static (AST) rules. (The run-time op table is
``runtime_ops.sync_classifiers``.)

``RULES`` is the catalog (id, severity, rationale, fix) that ``perfkit.scan`` reports;
``ExprKinds`` guesses, from the source alone, whether an expression is a tensor ("tensor"), host
data ("host") or unknown (None). The guess is deliberately simple and local to one file:
names bound from ``torch.*`` calls or tensor methods are tensors, names bound from literals,
``numpy``/``math`` calls, ``.item()``/``.tolist()``/``len()`` are host data, anything else is
unknown; ``print-tensor`` also treats unknown names like ``loss``/``policy_loss`` as tensors.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """A static check: ``severity`` is one of ``perfkit.results.SEVERITIES``."""

    id: str
    severity: str
    rationale: str
    fix: str


RULES = {r.id: r for r in (
    Rule("item-in-loop", "high",
         "`.item()`, `.cpu()`, `.numpy()`, `.tolist()` copy a device value to the host and wait for "
         "every queued kernel, once per iteration",
         "keep values on the device (accumulate into a tensor) and read them once after the loop, "
         "or every N steps"),
    Rule("tensor-condition", "high",
         "a tensor used as an `if`/`while`/`assert` condition is read back to the host (`__bool__`), "
         "which waits for the device",
         "use `torch.where`/masking to stay on the device, or check once every N steps"),
    Rule("print-tensor", "medium",
         "printing, formatting or logging a device tensor copies it to the host and waits",
         "log `.detach()`ed tensors collected on the device and read them every N steps"),
    Rule("legacy-tensor-ctor", "medium",
         "`torch.FloatTensor(x)`-style constructors and `torch.tensor(array).to(device)` copy twice "
         "and the device copy blocks (pageable memory)",
         "use `torch.from_numpy(x).to(device, non_blocking=True)` (pin the buffer for a real overlap)"),
    Rule("sync-in-loop", "high",
         "`synchronize()` inside a loop waits for all queued device work every iteration",
         "remove it, or synchronize only around timed regions (perfkit.bench does this)"),
    Rule("optimizer-not-fused", "low",
         "Adam/AdamW/SGD default to the for-each implementation on CUDA: more kernel launches, and "
         "under GradScaler `scaler.step` reads `found_inf` with `.item()` (a sync) every step",
         "pass `fused=True` (or choose `foreach=` explicitly)"),
    Rule("no-grad-inference", "low",
         "`torch.no_grad()` still tracks versions and views; `torch.inference_mode()` skips that "
         "bookkeeping where no gradient will ever be needed",
         "use `torch.inference_mode()`, but only if the results are never used in autograd later "
         "(inference tensors cannot be saved for backward; `.clone()` them if they are)"),
    Rule("blocking-to-device", "medium",
         "`.to(device)`/`.cuda()` of host data without `non_blocking=True` waits for the copy "
         "(and the device queue) every iteration",
         "pin the host batch (`DataLoader(pin_memory=True)` or `.pin_memory()`) and use "
         "`.to(device, non_blocking=True)`"),
    Rule("where-nonzero", "medium",
         "one-argument `torch.where(mask)` is `torch.nonzero(mask, as_tuple=True)`: its output size "
         "depends on the data, so the host waits for the device to count the matches (and "
         "torch.compile breaks the graph there)",
         "use the three-argument `torch.where(mask, a, b)` or mask arithmetic (`x * mask`), which keep "
         "shapes fixed; if you need the indices, `torch.nonzero_static(mask, size=k)` pads them to a "
         "fixed count"),
    Rule("nonzero-in-step", "medium",
         "`.nonzero()`, `torch.nonzero`, `argwhere` and `masked_select` size their output by the number "
         "of matches, so the host waits for the device to count them, in every `forward` pass or loop "
         "iteration (and torch.compile breaks the graph there)",
         "keep shapes fixed: mask arithmetic (`x * mask`), three-argument `torch.where(mask, a, b)`, "
         "`masked_fill`, or `torch.nonzero_static(mask, size=k)` when you need the indices"),
    Rule("bool-mask-index", "medium",
         "indexing with a boolean mask (`x[x > 0]`, `x[mask]` with `mask = a > b`) is a nonzero: the "
         "result's size depends on the data, so the host waits for the device, in every `forward` pass "
         "or loop iteration",
         "keep shapes fixed: `torch.where(mask, x, 0)`, `x * mask`, `x.masked_fill(~mask, 0)`, or a "
         "masked reduction (`(x * mask).sum() / mask.sum()`) instead of selecting the elements"),
    Rule("check-in-forward", "high",
         "a NaN/Inf check (`if torch.isnan(x).any():`) or an `.any().item()` read inside `forward` (or "
         "a helper that `forward` calls) waits for the device once per check per forward pass: 50 "
         "checks in a model are 50 syncs per step",
         "take the checks off the hot path: accumulate `torch.isfinite(x).all()` into a device flag and "
         "read it every N steps, repair without a branch (`torch.nan_to_num`, `clamp`), or turn on "
         "`torch.autograd.set_detect_anomaly(True)` only while debugging"),
    Rule("parse-error", "info",
         "the file could not be parsed, so no other rule ran on it",
         "fix the syntax error (or exclude the file)"),
)}

INFERENCE_TOKENS = frozenset({
    "eval", "evaluate", "evaluation", "predict", "prediction", "act", "plan", "inference", "infer",
    "rollout", "validate", "validation", "generate",
})
OPTIMIZERS = frozenset(f"torch.optim.{n}" for n in ("Adam", "AdamW", "SGD")) | frozenset(
    f"torch.optim.{m}.{n}" for m, n in (("adam", "Adam"), ("adamw", "AdamW"), ("sgd", "SGD")))
LEGACY_CTORS = frozenset(
    f"torch.{prefix}{n}Tensor" for prefix in ("", "cuda.") for n in (
        "", "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool"))
NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
SYNC_PREDICATES = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})
HOST_MODULES = ("numpy.", "math.", "pandas.", "random.", "statistics.", "time.", "os.", "json.")
_HOST_CALLS = frozenset({
    "float", "int", "len", "str", "repr", "bool", "isinstance", "hasattr", "callable", "range",
    "enumerate", "zip", "sorted", "list", "tuple", "dict", "set", "round", "any", "all", "type",
})
_HOST_METHODS = frozenset({
    "item", "tolist", "numpy", "cpu", "size", "dim", "numel", "nelement", "element_size",
    "data_ptr", "stride", "is_contiguous", "get_device", "is_floating_point", "is_complex", "keys",
    "values", "items", "get", "format", "join", "split", "strip", "startswith", "endswith",
    "count", "index", "copy",
})
_TENSOR_METHODS = frozenset({
    "any", "all", "sum", "mean", "max", "min", "amax", "amin", "std", "var", "norm", "abs", "prod",
    "argmax", "argmin", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le", "exp",
    "log", "sqrt", "pow", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "clamp", "detach",
    "clone", "float", "double", "half", "bfloat16", "long", "bool", "to", "cuda", "squeeze",
    "unsqueeze", "view", "reshape", "flatten", "cumsum", "square", "logical_and", "logical_or",
    "logical_not", "median", "count_nonzero", "masked_fill", "matmul", "gather", "contiguous",
    "neg", "sign", "nonzero", "masked_select",
})
_HOST_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes", "list", "dict", "tuple", "set"})
_HOST_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "is_leaf", "layout"})
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "data", "grad", "real", "imag"})
# torch.<sub>.* namespaces whose calls do not return tensors (or whose results we cannot guess)
_NON_TENSOR_SUBMODULES = frozenset({
    "cuda", "backends", "distributed", "jit", "compiler", "onnx", "utils", "optim", "autograd",
    "testing", "hub", "fx", "export", "profiler", "multiprocessing", "amp", "distributions",
    "version", "accelerator", "mps", "xpu", "library", "overrides", "ao", "nn", "random",
})
_NON_TENSOR_FUNCS = re.compile(
    r"^(is_|are_|get_|has_|set_|use_|manual_seed$|no_grad$|inference_mode$|enable_grad$|device$"
    r"|dtype$|Size$|Generator$|autocast$|compile$|save$|load$|typename$|numel$|equal$|allclose$)")
_LOSS_NAME = re.compile(r"^(\w+_)?loss(es)?$", re.IGNORECASE)


def name_tokens(name: str) -> set[str]:
    """``evaluatePolicy`` / ``evaluate_policy`` -> {"evaluate", "policy"}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return {t.lower() for t in spaced.split("_") if t}


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module path for every import in the file (``F`` -> ``torch.nn.functional``)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    aliases.setdefault("np", "numpy")
    return aliases


def qualname(node: ast.AST, aliases: dict[str, str]) -> str:
    """Dotted name of ``a.b.c`` with imports resolved (``optim.Adam`` -> ``torch.optim.Adam``); "" if not a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def looks_like_device(node: ast.AST | None) -> bool:
    """``device``, ``self.dev``, ``"cuda:0"``, ``torch.device("cuda")``: an argument naming a device."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("cuda", "mps", "xpu"))
    if isinstance(node, ast.Call):
        return looks_like_device(node.args[0]) if node.args else False
    ident = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    ident = ident.lower()
    return "device" in ident or ident.startswith("dev") or ident in ("cuda", "gpu")


def is_cpu_target(call: ast.Call) -> bool:
    target = call.args[0] if call.args else keyword(call, "device")
    return isinstance(target, ast.Constant) and target.value == "cpu"


def torch_returns_tensor(qual: str) -> bool:
    parts = qual.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if parts[1:3] == ["nn", "functional"]:
        return len(parts) == 4
    if parts[1] in _NON_TENSOR_SUBMODULES or parts[1][:1].isupper():
        return False
    return not _NON_TENSOR_FUNCS.match(parts[-1])


class ExprKinds:
    """Flow-ordered guesses of which names hold tensors, one dict per open scope.

    In a file that never imports torch (``guess=False``) nothing is guessed from method names
    (``df.mean()``, ``mask.any()`` are pandas/numpy there) or from ``loss``-like names.
    """

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.guess = any(v == "torch" or v.startswith("torch.") for v in aliases.values())
        self.scopes: list[dict[str, str | None]] = [{}]

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def bind(self, target: ast.AST, kind: str | None) -> None:
        if isinstance(target, ast.Name):
            self.scopes[-1][target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, None)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None)

    def lookup(self, name: str, guess_names: bool) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                kind = scope[name]
                break
        else:
            kind = None
        if kind is None and guess_names and self.guess and _LOSS_NAME.match(name):
            return "tensor"
        return kind

    def kind(self, node: ast.AST, guess_names: bool = False) -> str | None:
        """"tensor", "host" or None (unknown) for an expression."""
        if isinstance(node, (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set,
                             ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)):
            return "host"
        if isinstance(node, ast.Name):
            return self.lookup(node.id, guess_names)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, guess_names)
        if isinstance(node, ast.Subscript):
            return self.kind(node.value, guess_names)
        if isinstance(node, ast.Call):
            return self._call(node, guess_names)
        if isinstance(node, ast.BinOp):
            return self.merge(self.kind(node.left, guess_names), self.kind(node.right, guess_names))
        if isinstance(node, ast.UnaryOp):
            return "host" if isinstance(node.op, ast.Not) else self.kind(node.operand, guess_names)
        if isinstance(node, ast.Compare):
            return self._compare(node, guess_names)
        return None

    @staticmethod
    def merge(a: str | None, b: str | None) -> str | None:
        if "tensor" in (a, b):
            return "tensor"
        return "host" if a == b == "host" else None

    def _attribute(self, node: ast.Attribute, guess_names: bool) -> str | None:
        if node.attr in _HOST_ATTRS:
            return "host"
        if node.attr in _TENSOR_ATTRS and self.kind(node.value, guess_names) == "tensor":
            return "tensor"
        return None

    def _compare(self, node: ast.Compare, guess_names: bool) -> str | None:
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return "host"
        kinds = [self.kind(n, guess_names) for n in (node.left, *node.comparators)]
        if "tensor" in kinds:
            return "tensor"
        return "host" if all(k == "host" for k in kinds) else None

    def _call(self, node: ast.Call, guess_names: bool) -> str | None:
        qual = qualname(node.func, self.aliases)
        if qual.startswith(HOST_MODULES) or qual in _HOST_CALLS:
            return "host"
        if qual.startswith("torch."):
            return "tensor" if torch_returns_tensor(qual) else None
        if not isinstance(node.func, ast.Attribute):
            return None
        method, receiver = node.func.attr, self.kind(node.func.value, guess_names)
        if method in _HOST_METHODS or receiver == "host":
            return "host"
        return "tensor" if method in _TENSOR_METHODS and (self.guess or receiver == "tensor") else None

    def annotation_kind(self, annotation: ast.AST | None) -> str | None:
        """``torch.Tensor`` (also inside ``Optional[...]``/``| None``) -> tensor; numpy, pandas, builtins -> host."""
        if annotation is None:
            return None
        quals = {qualname(n, self.aliases) for n in ast.walk(annotation) if isinstance(n, (ast.Name, ast.Attribute))}
        if quals & {"torch.Tensor", "Tensor"}:
            return "tensor"
        host = any(q.startswith(HOST_MODULES) or q in _HOST_ANNOTATIONS for q in quals)
        return "host" if host else None

    def element_kind(self, iterable: ast.AST) -> str | None:
        """Kind of the loop variable of ``for x in iterable``: host for ``range``/numpy/math iterables."""
        if isinstance(iterable, ast.Call):
            qual = qualname(iterable.func, self.aliases)
            if qual == "range" or qual.startswith(HOST_MODULES):
                return "host"
        return None

    def is_tensor(self, node: ast.AST, guess_names: bool = False) -> bool:
        return self.kind(node, guess_names) == "tensor"

