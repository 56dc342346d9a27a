"""Device selection and synchronization, in one place.

``resolve_device("auto")`` is CUDA when a GPU is visible, else CPU. ``synchronize(device)``
waits for queued GPU work so a timer measures the work and not only its launch.
"""
from __future__ import annotations

from .errors import ParameterError

_VALID = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> str:
    """Return "cuda" or "cpu" ("cuda:N" is kept). Raises ParameterError for unknown names
    or for "cuda" on a machine without a GPU."""
    import torch

    name = str(device)
    if name.split(":")[0] not in _VALID:
        raise ParameterError(f"device={device!r}: use one of {', '.join(_VALID)} (or 'cuda:N')")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError(f"device={device!r} but no CUDA GPU is visible: use device='cpu' or 'auto'")
    return name


def is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")


def synchronize(device: str) -> None:
    """Block until all queued work on ``device`` is done (no-op on CPU)."""
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)
