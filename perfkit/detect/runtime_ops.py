"""What counts as a sync point at run time: ``sync_classifiers()`` maps a torch function or Tensor
method, as a ``TorchFunctionMode`` receives it, to a check of its arguments that says whether the
call makes the host wait for the device. Sources: the PyTorch docs of the ops whose output size
depends on the data (nonzero, masked_select, unique, repeat_interleave without ``output_size``;
boolean-mask indexing is a nonzero) and what ``torch.cuda.set_sync_debug_mode`` flags (scalar
reads, device-to-host copies, blocking host-to-device copies). The static (AST) rules are in
``rules``."""
from __future__ import annotations


def _first_tensor(args):
    import torch  # heavy and optional: imported when the detector runs

    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    return None


def _target_device(args, kwargs):
    import torch  # heavy and optional: imported when the detector runs

    dev = kwargs.get("device")
    for a in args:
        if dev is not None:
            break
        if isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
            dev = a
        elif isinstance(a, torch.Tensor):
            dev = a.device
    return None if dev is None else torch.device(dev)


def _non_blocking(args, kwargs) -> bool:
    return bool(kwargs.get("non_blocking")) or any(a is True for a in args)


def _to(args, kwargs):
    self, target = args[0], _target_device(args[1:], kwargs)
    if target is None or _non_blocking(args[1:], kwargs):
        return None
    if target.type == "cpu":
        return "to(cpu)", self, True
    return ("to(device)", None, False) if self.device.type == "cpu" else None


def _cuda(args, kwargs):
    blocking = not _non_blocking(args[1:], kwargs)
    return ("cuda", None, False) if blocking and args[0].device.type == "cpu" else None


def _copy(args, kwargs):
    dst, src = args[0], args[1] if len(args) > 1 else kwargs.get("src")
    if src is None or _non_blocking(args[2:], kwargs) or src.device.type == dst.device.type:
        return None
    return "copy_", None, False


def _repeat_interleave(args, kwargs):
    import torch  # heavy and optional: imported when the detector runs

    repeats = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if args else None)
    if not isinstance(repeats, torch.Tensor) or kwargs.get("output_size") is not None:
        return None
    return "repeat_interleave", repeats, True


def _where(args, kwargs):
    return ("where(cond)", args[0], True) if len(args) == 1 and not kwargs else None


def _getitem(args, kwargs):
    import torch  # heavy and optional: imported when the detector runs

    index = args[1]
    items = index if isinstance(index, (tuple, list)) else (index,)
    for i in items:
        if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8):
            return "bool-mask-index", i, True
    return None


def _simple(op):
    def classify(args, kwargs):
        return op, _first_tensor(args), True

    return classify


_CLASSIFIERS = None


def sync_classifiers() -> dict:
    """func -> classify(args, kwargs) returning (op, subject tensor or None, needs_device) or None.

    ``needs_device``: flag only when ``subject`` counts as a device tensor for the detector.
    """
    global _CLASSIFIERS
    if _CLASSIFIERS is None:
        import torch  # heavy and optional: imported when the detector runs

        T = torch.Tensor
        simple = {
            T.item: "item", T.__bool__: "bool", T.__float__: "float", T.__int__: "int",
            T.__index__: "index", T.__complex__: "complex", T.tolist: "tolist", T.numpy: "numpy",
            T.__array__: "numpy", T.cpu: "cpu", T.nonzero: "nonzero", torch.nonzero: "nonzero",
            T.argwhere: "argwhere", torch.argwhere: "argwhere", T.masked_select: "masked_select",
            torch.masked_select: "masked_select", T.unique: "unique", torch.unique: "unique",
            T.unique_consecutive: "unique_consecutive", torch.unique_consecutive: "unique_consecutive",
            T.__repr__: "repr", T.__format__: "format", T.__contains__: "in", T.equal: "equal",
            torch.equal: "equal", T.allclose: "allclose", torch.allclose: "allclose",
            torch.is_nonzero: "is_nonzero", T.is_nonzero: "is_nonzero", T.bincount: "bincount",
            torch.bincount: "bincount",
        }
        table = {func: _simple(op) for func, op in simple.items()}
        table.update({
            T.to: _to, T.cuda: _cuda, T.copy_: _copy, T.__getitem__: _getitem, torch.where: _where,
            T.repeat_interleave: _repeat_interleave, torch.repeat_interleave: _repeat_interleave,
        })
        _CLASSIFIERS = table
    return _CLASSIFIERS
