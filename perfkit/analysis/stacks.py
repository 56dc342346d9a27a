"""Map host events to the Python source line that caused them.

With ``with_stack=True`` Kineto writes one ``python_function`` event per Python frame, named
``"path/to/file.py(123): func"`` (paths relative to their ``sys.path`` entry, so site-packages is
already stripped), ``"<built-in method ...>"`` for C functions and ``"nn.Module: Linear_0"`` for
module calls. A host event's frames are the python_function events running on its thread when it
starts; the *user* frame is the innermost one that is not library code.

The line number is the one Kineto writes in the frame name: the first line of the running
function (its ``def``), not the statement inside it. A site therefore names the function that
caused the event (output says "function starting at file:line"); two ``.item()`` calls in one
function share a site. ``perfkit detect SCRIPT`` (run-time detection) gives the exact call line.

The frames of a host event are the python_function frame running on its thread when it starts and
that frame's ancestors along ``Python parent id`` (the ``parent`` column the loader fills), which
can continue on another thread: a hook that the autograd engine runs points back to the
``run_backward`` frame of the thread that called ``backward()``.

Besides the user frame, ``inner_*`` names the innermost frame with a file and line when that frame
is library code, e.g. ``transformers/models/owlv2/modeling_owlv2.py(1421): box_predictor`` for a
``.to()`` inside a model file the user called: the user frame says where in your code, the inner
frame which library function did it.

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

from ..trace.ancestry import Ancestors, enclosing

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_STDLIB_DIR = re.compile(r"/lib/python\d[\d.]*/")
# Frameworks whose frames are never "the user's line" (torch ecosystem and array libraries).
TORCH_PACKAGES = ("torch", "torchvision", "torchaudio", "torchtext", "torchrec", "functorch", "triton")
LIBRARY_PACKAGES = TORCH_PACKAGES + (
    "numpy", "transformers", "accelerate", "deepspeed", "lightning", "pytorch_lightning", "apex",
    "flashinfer", "xformers", "diffusers", "timm", "peft", "vllm", "torchrl", "stable_baselines3", "gymnasium",
    "tqdm", "typing_extensions", "_pytest", "pluggy",
)
_SPAN_COLUMNS = ["file_id", "pid", "tid", "ts_us", "dur_us"]  # what finding a host event's frame reads
FRAME_COLUMNS = ["frame", "file", "line", "func", "inner_frame", "inner_file", "inner_line", "inner_func"]


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
    """Innermost user Python frame of each host event (rows of ``trace.events``), and the innermost
    library frame below it.

    Returns a frame indexed like ``events`` with ``FRAME_COLUMNS``: ``frame`` (the python_function
    name), ``file``, ``line`` (first line of the function) and ``func`` of the user frame, and
    ``inner_frame``, ``inner_file``, ``inner_line``, ``inner_func`` of the innermost frame with a file
    and line when it is library code other than the user frame; None where the trace has no Python
    stacks or no frame applies. ``packages``: top-level packages treated as library code.
    """
    empty = pd.DataFrame({c: pd.Series([None] * len(events), index=events.index, dtype=object)
                          for c in FRAME_COLUMNS})
    for col in ("line", "inner_line"):
        empty[col] = pd.array([None] * len(events), dtype="Int64")
    ev = trace.events
    rows = (ev["ph"] == "X").to_numpy() & (ev["cat"] == "python_function").to_numpy()
    if events.empty or not rows.any():
        return empty
    trace.require("parent")
    # The frames' thread and interval only (a trace holds a million frames); the walk up reads the
    # whole table's ``parent`` and ``name`` columns in place.
    frames = ev.loc[rows, _SPAN_COLUMNS]
    walker = _Walker(ev, rows, packages)
    starts = walker.positions(enclosing(frames, events).to_numpy())
    users = [walker.user(x) for x in starts.tolist()]
    out = empty.copy()
    _fill(out, "", users, walker)
    _fill(out, "inner_", [walker.library_inner(x, u) for x, u in zip(starts.tolist(), users)], walker)
    return out


def _fill(out: pd.DataFrame, prefix: str, positions: list, walker: "_Walker") -> None:
    """Write frame name, file, line, func of the chosen frames (positions in the walker's frames,
    -1: none) into ``out``."""
    positions = np.asarray(positions, dtype=np.int64)
    hit = positions >= 0
    if not hit.any():
        return
    picked = [walker.name(p) for p in positions[hit].tolist()]
    parsed = [parse_frame(n) for n in picked]
    out.loc[hit, prefix + "frame"] = picked
    out.loc[hit, prefix + "file"] = [p[0] if p else None for p in parsed]
    out.loc[hit, prefix + "line"] = pd.array([p[1] if p else None for p in parsed], dtype="Int64")
    out.loc[hit, prefix + "func"] = [p[2] if p else None for p in parsed]


class _Walker:
    """Walks up python_function frames by position in the events table (``Python parent id`` links,
    the loader's ``parent`` column), with memoized answers; a frame's name is read only when the
    walk reaches it (a trace holds a million frames, a walk visits a few)."""

    def __init__(self, events: pd.DataFrame, is_frame: np.ndarray, packages):
        self.up, self.names, self.packages = Ancestors(events), events["name"], packages
        # A walk stays on python_function frames (``is_frame``: a mask over ``events``).
        self.parent = np.where(is_frame[np.clip(self.up.parent, 0, None)], self.up.parent, -1)
        # A categorical name is read through its code: one text per distinct name, not per frame.
        categorical = isinstance(self.names.dtype, pd.CategoricalDtype)
        self._codes = self.names.cat.codes.to_numpy() if categorical else None
        self._name: dict = {}
        self._kinds: dict = {}
        self._user: dict = {}

    def positions(self, labels: np.ndarray) -> np.ndarray:
        """Positions of frame labels (-1 stays -1)."""
        return self.up.positions(labels)

    def name(self, pos: int) -> str:
        key = pos if self._codes is None or self._codes[pos] < 0 else ~int(self._codes[pos])  # ~code: -1, -2, ...
        if key not in self._name:
            self._name[key] = str(self.names.iat[pos])
        return self._name[key]

    def user(self, pos: int) -> int:
        """First user frame from ``pos`` upward, else the first frame outside torch/stdlib, else -1."""
        if pos < 0:
            return -1
        user, fallback = self._above(pos)
        return user if user >= 0 else fallback

    def _above(self, pos: int) -> tuple[int, int]:
        """(first user frame, first frame outside torch/stdlib) from ``pos`` upward, -1 for none;
        memoized for every frame on the way, so walks from frames of one stack share their tops."""
        path, cur = [], pos
        while cur >= 0 and cur not in self._user and len(path) <= len(self.parent):  # longer: a cycle
            path.append(cur)
            cur = int(self.parent[cur])
        user, fallback = self._user.get(cur, (-1, -1))
        for frame in reversed(path):
            kind = self._kind(frame)
            user, fallback = (frame if kind == "user" else user), (frame if kind == "fallback" else fallback)
            self._user[frame] = (user, fallback)
        return self._user[pos]

    def _kind(self, pos: int) -> str:
        """"user", "fallback" (library, not torch or stdlib), "library" or "" (no file and line)."""
        name = self.name(pos)
        if name not in self._kinds:
            parsed = parse_frame(name)
            self._kinds[name] = "" if parsed is None else "user" if not is_library(parsed[0], self.packages) \
                else "fallback" if not is_library(parsed[0], TORCH_PACKAGES) else "library"
        return self._kinds[name]

    def library_inner(self, pos: int, user: int) -> int:
        """The innermost frame with a file and line from ``pos`` upward, if it is library code and
        not ``user``; else -1."""
        cur = pos
        while cur >= 0:
            parsed = parse_frame(self.name(cur))
            if parsed is not None:
                return cur if cur != user and is_library(parsed[0], self.packages) else -1
            cur = int(self.parent[cur])
        return -1
