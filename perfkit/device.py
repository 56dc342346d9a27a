"""Device selection and synchronization, in one place.

``resolve_device("auto")`` is CUDA when a GPU is visible, else CPU. ``synchronize(device)``
waits for queued GPU work so a timer measures the work and not only its launch.
"""
from __future__ import annotations

from .errors import MissingDependencyError, ParameterError

_VALID = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> str:
    """Return "cuda" or "cpu" ("cuda:N" is kept). Raises ParameterError for unknown names,
    for "cuda" on a machine without a GPU, or for "cuda:N" with no visible GPU N; MissingDependencyError
    without torch."""
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", f"device={device!r}") from None

    name = str(device)
    if name.split(":")[0] not in _VALID or name.startswith("auto:"):
        raise ParameterError(f"device={device!r}: use one of {', '.join(_VALID)} (or 'cuda:N')")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(f"device={device!r} but no CUDA GPU is visible: use device='cpu' or 'auto'")
    if name.startswith("cuda:"):
        _check_cuda_index(name, torch.cuda.device_count())
    return name


def _check_cuda_index(name: str, count: int) -> None:
    index = name.split(":", 1)[1]
    if not (index.isdigit() and int(index) < count):
        raise ParameterError(f"device={name!r}: this machine has {count} visible CUDA GPU(s), "
                             f"use 'cuda' or 'cuda:0'..'cuda:{count - 1}' (CUDA_VISIBLE_DEVICES renumbers them)")


def is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def synchronize(device: str) -> None:
    """Block until all queued work on ``device`` is done (no-op on CPU)."""
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)
