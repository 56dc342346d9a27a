"""Map host events to the Python source line that caused them.

With ``with_stack=True`` Kineto writes one ``python_function`` event per Python frame, named
``"path/to/file.py(123): func"`` (paths relative to their ``sys.path`` entry, so site-packages is
already stripped), ``"<built-in method ...>"`` for C functions and ``"nn.Module: Linear_0"`` for
module calls. A host event's frames are the python_function events running on its thread when it
starts; the *user* frame is the innermost one that is not library code.

The line number is the one Kineto writes in the frame name: in torch 2.x the first line of the
running function (its ``def``), not the statement inside it. A site therefore names the function
that caused the event; two ``.item()`` calls in one function share a site.

Library code is: built-ins and ``nn.Module`` markers, the Python standard library
(``sys.stdlib_module_names``, or an absolute ``.../lib/pythonX.Y/`` path), paths under
``site-packages``/``dist-packages``, and the packages in
``LIBRARY_PACKAGES``. When every frame is library code the innermost frame outside torch and the
standard library is used instead (e.g. a vLLM or transformers model file), so a site still gets a
line.
"""
from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd

from .ops import enclosing, nest

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_STDLIB_DIR = re.compile(r"/lib/python\d[\d.]*/")
# Frameworks whose frames are never "the user's line" (torch ecosystem and array libraries).
TORCH_PACKAGES = ("torch", "torchvision", "torchaudio", "torchtext", "torchrec", "functorch", "triton")
LIBRARY_PACKAGES = TORCH_PACKAGES + (
    "numpy", "transformers", "accelerate", "deepspeed", "lightning", "pytorch_lightning", "apex",
    "flashinfer", "xformers", "tqdm", "typing_extensions", "_pytest", "pluggy",
)
FRAME_COLUMNS = ["frame", "file", "line", "func"]


def parse_frame(name: str) -> tuple[str, int, str] | None:
    """``"train.py(42): step"`` -> ``("train.py", 42, "step")``; None for built-ins and module markers."""
    m = _FRAME.match(name)
    if m is None:
        return None
    return m.group("file"), int(m.group("line")), m.group("func")


def is_library(path: str, packages=LIBRARY_PACKAGES) -> bool:
    """Whether a frame's file belongs to the standard library, site-packages or ``packages``."""
    p = path.replace("\\", "/")
    if "site-packages/" in p or "dist-packages/" in p or p.startswith("<") or _STDLIB_DIR.search(p):
        return True
    top = p.lstrip("/").split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return top in packages or top in sys.stdlib_module_names


def user_frames(trace, events: pd.DataFrame, *, packages=LIBRARY_PACKAGES) -> pd.DataFrame:
    """Innermost user Python frame of each host event (rows of ``trace.events``).

    Returns a frame indexed like ``events`` with columns ``frame`` (the python_function name),
    ``file``, ``line`` and ``func``; all None where the trace has no Python stacks or no frame
    encloses the event. ``packages``: top-level packages treated as library code.
    """
    empty = pd.DataFrame({"frame": None, "file": None, "line": pd.Series(dtype="Int64"), "func": None},
                         index=events.index)
    frames = trace.select("python_function")
    if frames.empty or events.empty:
        return empty
    inner = enclosing(frames, events)
    parents = nest(frames)["parent"]
    names = frames["name"].astype(str)
    chosen = _walk_up(inner, parents, names, packages)
    labels = chosen.to_numpy()
    out = empty.copy()
    hit = labels >= 0
    if hit.any():
        picked = names.reindex(labels[hit]).to_numpy()
        parsed = [parse_frame(n) for n in picked]
        out.loc[hit, "frame"] = picked
        out.loc[hit, "file"] = [p[0] if p else None for p in parsed]
        out.loc[hit, "line"] = pd.array([p[1] if p else None for p in parsed], dtype="Int64")
        out.loc[hit, "func"] = [p[2] if p else None for p in parsed]
    return out


def _walk_up(inner: pd.Series, parents: pd.Series, names: pd.Series, packages) -> pd.Series:
    """From each innermost frame walk to the first user frame (else the first non-torch frame)."""
    parent = parents.to_dict()
    name = names.to_dict()
    memo: dict = {}

    def pick(label: int) -> int:
        if label in memo:
            return memo[label]
        user = fallback = -1
        cur = label
        while cur >= 0 and user < 0:
            parsed = parse_frame(name[cur])
            if parsed is not None:
                if not is_library(parsed[0], packages):
                    user = cur
                elif fallback < 0 and not is_library(parsed[0], TORCH_PACKAGES):
                    fallback = cur
            cur = parent.get(cur, -1)
        memo[label] = user if user >= 0 else fallback
        return memo[label]

    return pd.Series([pick(int(x)) if x >= 0 else -1 for x in inner.to_numpy()], index=inner.index, dtype=np.int64)
