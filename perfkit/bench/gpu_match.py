"""Which NVML devices are this process's CUDA devices.

NVML numbers every GPU on the node and ignores CUDA_VISIBLE_DEVICES; CUDA (and torch) number
only the visible GPUs, in the order CUDA_VISIBLE_DEVICES lists them. With
``CUDA_VISIBLE_DEVICES=3`` torch's ``cuda:0`` is NVML device 3. ``match_gpus`` maps CUDA index
-> NVML index: by UUID when torch's device UUIDs are known, else by reading
CUDA_VISIBLE_DEVICES the way CUDA does (torch.cuda._parse_visible_devices follows the same rules:
the first invalid entry ends the list, a repeated device empties it).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace

# A UUID, or the start of one, written without its "GPU-" prefix: hex groups joined by dashes.
_BARE_UUID = re.compile(r"[0-9a-f]+(-[0-9a-f]*)*")
_LEADING_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class GpuMatch:
    """``pairs``: (cuda_index, nvml_index) per GPU this process uses, in CUDA order;
    cuda_index is None when it could not be worked out (MIG: every NVML GPU is listed).
    ``source`` says how the match was made, ``reason`` why ``pairs`` is empty (None otherwise)."""

    pairs: tuple[tuple[int | None, int], ...]
    source: str
    reason: str | None = None
    warnings: tuple[str, ...] = ()


def normalize_uuid(value) -> str | None:
    """A UUID for comparison: bytes -> str, ``GPU-``/``MIG-`` prefix dropped, lower case.
    ``'GPU-7FDF...'``, ``b'GPU-7fdf...'`` and torch's ``'7fdf...'`` all give ``'7fdf...'``."""
    if value is None:
        return None
    text = (value.decode(errors="replace") if isinstance(value, bytes) else str(value)).strip().lower()
    if text.startswith(("gpu-", "mig-")):
        text = text[4:]
    return text or None


def display_uuid(value) -> str | None:
    """A UUID as nvidia-smi prints it: ``GPU-`` (or ``MIG-``) and the lower-case hex."""
    uuid = normalize_uuid(value)
    if uuid is None:
        return None
    raw = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return ("MIG-" if raw.strip().lower().startswith("mig-") else "GPU-") + uuid


def match_uuids(torch_uuids, nvml_uuids) -> list[int | None]:
    """For each torch device (in CUDA index order) the NVML index whose UUID equals its own,
    or None. Both lists are indexed by their device index; UUIDs are compared normalized."""
    nvml = [normalize_uuid(u) for u in nvml_uuids]
    out = []
    for uuid in map(normalize_uuid, torch_uuids):
        out.append(nvml.index(uuid) if uuid is not None and uuid in nvml else None)
    return out


def match_gpus(nvml_uuids, *, torch_uuids=None, visible: str | None = None) -> GpuMatch:
    """Map CUDA indices to NVML indices. ``nvml_uuids``: the UUID of each NVML device in NVML
    order (None for one NVML could not read). ``torch_uuids``: the UUID of each torch CUDA device
    in CUDA order, or None/empty when torch is absent or has no CUDA. ``visible``: the value of
    CUDA_VISIBLE_DEVICES (None when unset).

    With torch's UUIDs the match is exact. Without them CUDA_VISIBLE_DEVICES is parsed: unset ->
    every NVML device; integer entries are NVML indices, taken in NVML (PCI bus) order, which is
    CUDA's order only with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs (CUDA's default,
    FASTEST_FIRST, may put another GPU first); UUID entries (``GPU-`` optional, a unique prefix
    is enough) match NVML's UUIDs; the first invalid entry ends the list; "" or "-1" -> no GPU.
    MIG entries are not resolved: a warning, and every NVML GPU is listed."""
    if not torch_uuids:
        return match_visible(nvml_uuids, visible)
    found = match_uuids(torch_uuids, nvml_uuids)
    warnings = tuple(f"cuda:{i} (UUID {display_uuid(u)}) matches no NVML device: it is not monitored"
                     for i, (u, n) in enumerate(zip(torch_uuids, found)) if n is None)
    pairs = tuple((i, n) for i, n in enumerate(found) if n is not None)
    if pairs:
        return GpuMatch(pairs, "torch device UUIDs", warnings=warnings)
    fallback = match_visible(nvml_uuids, visible)
    note = "no torch device UUID matches an NVML device: GPUs chosen from CUDA_VISIBLE_DEVICES instead"
    return replace(fallback, warnings=(*warnings, note, *fallback.warnings))


def match_visible(nvml_uuids, visible: str | None) -> GpuMatch:
    """CUDA_VISIBLE_DEVICES alone (see ``match_gpus``)."""
    nvml = [normalize_uuid(u) for u in nvml_uuids]
    if visible is None:
        return GpuMatch(tuple(enumerate(range(len(nvml)))), "every NVML device (CUDA_VISIBLE_DEVICES unset)")
    source = f"CUDA_VISIBLE_DEVICES={visible!r}"
    if not nvml:  # nothing to choose from: the caller says "NVML reports 0 GPUs"
        return GpuMatch((), source)
    entries = [e.strip() for e in visible.split(",")]
    if any(e.lower().startswith("mig-") for e in entries):
        return GpuMatch(tuple((None, i) for i in range(len(nvml))), f"every NVML device ({source} names MIG)",
                        warnings=(f"{source} names MIG instances: perfkit does not resolve MIG UUIDs, so every "
                                  "GPU NVML lists is monitored, labelled by NVML index",))
    picked: list[int] = []
    for k, entry in enumerate(entries):
        nvml_index = _entry_index(entry, nvml)
        if nvml_index is None:
            return _cut(picked, source, entries, k, len(nvml))
        if nvml_index in picked:  # CUDA (and torch) make a repeated device hide every GPU
            return GpuMatch((), source, f"{source} lists NVML device {nvml_index} twice: CUDA then shows no GPU")
        picked.append(nvml_index)
    return GpuMatch(tuple(enumerate(picked)), source)


def _cut(picked: list[int], source: str, entries: list[str], k: int, count: int) -> GpuMatch:
    """The list CUDA keeps when entry ``k`` is invalid: the entries before it."""
    why = (f"entry {entries[k]!r} is neither an index below {count} (NVML lists {count} GPUs) nor a "
           "unique UUID prefix; CUDA stops at the first invalid entry")
    if not picked:
        return GpuMatch((), source, f"{source} hides every GPU ({why})")
    dropped = ", ".join(repr(e) for e in entries[k:])
    return GpuMatch(tuple(enumerate(picked)), source, warnings=(f"{source}: {why}, so {dropped} are ignored",))


def _entry_index(entry: str, nvml: list[str | None]) -> int | None:
    """The NVML index one CUDA_VISIBLE_DEVICES entry names, or None when it is invalid."""
    if entry.isdigit():
        return int(entry) if int(entry) < len(nvml) else None
    low = entry.lower()
    if low.startswith("gpu-") or _BARE_UUID.fullmatch(low):
        prefix = normalize_uuid(low)
        hits = [i for i, uuid in enumerate(nvml) if prefix and uuid and uuid.startswith(prefix)]
        return hits[0] if len(hits) == 1 else None
    lead = _LEADING_DIGITS.match(entry)  # CUDA reads a number like strtoul: "1gpu2" is 1
    return _entry_index(lead.group(), nvml) if lead else None


def loaded_torch_uuids() -> list[str] | None:
    """UUIDs of torch's CUDA devices in CUDA order, only when this process already imported torch
    and initialized CUDA; None otherwise. Importing torch costs about a second, and initializing
    CUDA from a monitor would leave CUDA state that a later fork (DataLoader workers) inherits."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        if cuda is None or not cuda.is_initialized():
            return None
        return [str(cuda.get_device_properties(i).uuid) for i in range(cuda.device_count())]
    except (AttributeError, RuntimeError):  # a torch without .uuid, or a CUDA error
        return None
