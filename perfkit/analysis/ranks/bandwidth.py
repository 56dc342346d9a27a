"""How fast each collective moved its data: bytes, algorithm and bus bandwidth, as nccl-tests count them.

Sizes come from what PyTorch records (:mod:`perfkit.trace.loader.comm_args`): on the NCCL/RCCL kernel itself or,
in older traces and on ROCm, on the ``record_param_comms`` op its launch runs inside. A collective's
**bytes** follow nccl-tests (``doc/PERFORMANCE.md``): the buffer for all-reduce, reduce, broadcast, the
full output for all-gather, the full input for reduce-scatter and all-to-all. **algbw** = bytes / time;
**busbw** = algbw x the collective's factor, which makes every collective comparable with the link's own
bandwidth: all-reduce 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n, the rest 1 (n: ranks in
the group).

The time is the **transfer** only: from the last rank's arrival to the end, which is the duration of the
last-arriving rank's kernel (the others' kernels also hold their wait for it; see ``collectives``). With
one rank's trace the wait cannot be told apart, so the kernel's whole duration is used and the bus
bandwidth is a floor (``measured`` says which).

A collective moving at least ``LARGE_BYTES`` (bandwidth-bound, not latency-bound) whose bus bandwidth is
under ``LINK_SHARE`` of the GPU's per-direction link figure (``LINK_GBS``) is flagged.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...results import Finding
from ...trace.loader.comm_args import comm_args
from ..gpu_kernels.devices import find_device

MESSAGE_COLUMNS = ["collective", "algorithm", "dtype", "group_size", "group_ranks", "bytes"]
BANDWIDTH_COLUMNS = ["step", "name", "occurrence", "collective", "algorithm", "dtype", "group_size", "scope", "bytes",
                     "ranks", "wait_us", "transfer_us", "algbw_gbs", "busbw_gbs", "measured"]
SCOPES = ("intra-node", "inter-node")
# Bytes from which a collective is bandwidth-bound: nccl-tests' bus bandwidth on NVLink reaches most of
# its plateau from tens of MiB; below a few MiB latency dominates and a low figure says nothing of the link.
LARGE_BYTES = 16 << 20
# Bus bandwidth under this share of the link's per-direction figure is "far below" it: NCCL reaches 70-85%
# of it on large all-reduces (DGX A100: about 230 of 300 GB/s), so a quarter is a path or setup problem.
LINK_SHARE = 0.25
# GB/s per direction of each GPU's scale-up link, from the datasheets (total bidirectional / 2). PCIe
# cards are left out: with or without an NVLink bridge, the trace does not say which.
LINK_GBS = {
    "V100-SXM2": ("NVLink 2", 150.0), "A100-40GB": ("NVLink 3", 300.0), "A100-80GB": ("NVLink 3", 300.0),
    "H100-SXM": ("NVLink 4", 450.0), "H200": ("NVLink 4", 450.0), "GH200": ("NVLink 4", 450.0),
    "H800": ("NVLink 4 (H800: 400 GB/s both ways)", 200.0),
    "B200": ("NVLink 5", 900.0), "MI300X": ("Infinity Fabric", 448.0),
}
# c10 ScalarType names as Kineto writes them -> bytes per element.
DTYPE_BYTES = {"Bool": 1, "Byte": 1, "Char": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1,
               "Float8_e5m2fnuz": 1, "UInt8": 1, "Int8": 1, "Short": 2, "Half": 2, "BFloat16": 2, "UInt16": 2,
               "Int": 4, "Float": 4, "UInt32": 4, "ComplexHalf": 4, "Long": 8, "Double": 8, "UInt64": 8,
               "ComplexFloat": 8, "ComplexDouble": 16}
_KINDS = (  # (normalized recorded name, kind, bytes from "in"/"out", bus factor)
    ("allreduce", "all-reduce", "in", lambda n: 2 * (n - 1) / n),
    ("allgather", "all-gather", "out", lambda n: (n - 1) / n),
    ("reducescatter", "reduce-scatter", "in", lambda n: (n - 1) / n),
    ("alltoall", "all-to-all", "in", lambda n: (n - 1) / n),
    ("alltoallv", "all-to-all", "in", lambda n: (n - 1) / n),  # all_to_all_single with split sizes (MoE dispatch)
    ("broadcast", "broadcast", "in", lambda n: 1.0), ("reduce", "reduce", "in", lambda n: 1.0),
    ("send", "send", "in", lambda n: 1.0), ("recv", "recv", "out", lambda n: 1.0),
    ("gather", "gather", "out", lambda n: (n - 1) / n), ("scatter", "scatter", "in", lambda n: (n - 1) / n),
)
NO_SIZES = ("no collective records its message size ('Collective name' and 'In msg nelems', written by "
            "PyTorch 2.1+ on each NCCL kernel or its record_param_comms op): bus bandwidth unknown")
_ALGORITHM = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)(?=[_(<]|$)")


def collective_kind(recorded: str):
    """(kind, bytes side, bus factor) of a recorded collective name ("allreduce", "_allgather_base",
    "reduce_scatter_tensor_coalesced", ...), or None for one that moves no data (barrier) or is unknown."""
    key = re.sub(r"intotensor|tensor|coalesced|base", "", str(recorded).lower().replace("_", ""))
    for name, kind, side, factor in _KINDS:
        if key == name:
            return kind, side, factor
    return None


def algorithm(kernel_name: str) -> str:
    """NCCL's algorithm and protocol from a kernel name ("RING_LL" from ``ncclKernel_AllReduce_RING_LL_Sum_float``),
    "" when the name does not say (NCCL 2.19+'s ``ncclDevKernel_Generic``, RCCL)."""
    found = _ALGORITHM.search(str(kernel_name))
    return f"{found.group(1)}_{found.group(2)}" if found else ""


def kernel_messages(trace, comm: pd.DataFrame) -> pd.DataFrame:
    """Per communication kernel of ``trace`` (rows of ``trace.kernels()``): ``MESSAGE_COLUMNS``, from the
    arguments on the kernel, else on the nearest op around its launch that records them (bytes NaN and
    collective "" when neither does)."""
    recorded = comm_args(trace)
    source = pd.Series(np.where(comm.index.isin(recorded.index), comm.index, -1), index=comm.index, dtype=np.int64)
    missing = source < 0
    if missing.any() and len(recorded):
        source[missing] = _recorded_ancestor(trace, comm.index[missing.to_numpy()], recorded.index)
    facts = recorded.reindex(source.to_numpy())
    facts.index = comm.index
    kinds = [collective_kind(c) if isinstance(c, str) else None for c in facts["collective"]]
    group = facts["group_size"].to_numpy(dtype=np.float64)
    count = np.where([k is not None and k[1] == "out" for k in kinds], facts["out_nelems"], facts["in_nelems"])
    size = facts["dtype"].map(DTYPE_BYTES).to_numpy(dtype=np.float64)
    return pd.DataFrame({
        "collective": [k[0] if k else "" for k in kinds],
        "algorithm": [algorithm(n) for n in comm["name"].astype(str)],
        "dtype": facts["dtype"].fillna("").to_numpy(), "group_size": group,
        "group_ranks": facts["group_ranks"].fillna("").astype(str).to_numpy(),
        "bytes": np.where([k is not None for k in kinds], count.astype(np.float64) * size, np.nan),
    }, index=comm.index)


def _recorded_ancestor(trace, kernels: pd.Index, recorded: pd.Index) -> np.ndarray:
    """Per kernel label: the label of the nearest op enclosing its launch that records a collective, else -1."""
    links = trace.launches(("kernel",))[["gpu_index", "cpu_index"]].drop_duplicates("gpu_index")
    cur = pd.Series(links["cpu_index"].to_numpy(), index=links["gpu_index"].to_numpy()).reindex(kernels)
    cur = np.array(cur.fillna(-1).to_numpy(dtype=np.int64))
    parent = trace.events["parent"].to_numpy(dtype=np.int64)
    has = np.zeros(len(parent), dtype=bool)
    has[recorded.to_numpy(dtype=np.int64)] = True
    out = np.full(len(kernels), -1, dtype=np.int64)
    while (live := np.flatnonzero(cur >= 0)).size:
        at = cur[live]
        found = has[at]
        out[live[found]] = at[found]
        cur[live] = np.where(found, -1, parent[at])
    return out


def bandwidth_table(kernels: pd.DataFrame, arrived: pd.DataFrame, nodes: tuple = (None, None)) -> pd.DataFrame:
    """One row per collective of known size (``BANDWIDTH_COLUMNS``): ``kernels`` are every rank's
    communication kernels with ``MESSAGE_COLUMNS``, ``arrived`` the matched ones (``collectives.arrivals``).
    Matched across ranks, the transfer is the last arrival's kernel and ``wait_us`` the longest wait; on one
    rank the transfer is the whole kernel (``measured`` "one rank: includes waiting"). ``nodes``: (ranks per
    node, world size), for each collective's ``scope`` (:func:`scope`)."""
    key = ["step", "name", "occurrence"]
    sized = kernels[np.isfinite(kernels["bytes"].to_numpy(dtype=np.float64))]
    if sized.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in BANDWIDTH_COLUMNS})
    first = sized.groupby(key, sort=False).agg(collective=("collective", "first"), algorithm=("algorithm", "first"),
                                                dtype=("dtype", "first"), group_size=("group_size", "first"),
                                                group_ranks=("group_ranks", "first"),
                                                bytes=("bytes", "first"), ranks=("file_id", "size"),
                                                dur_us=("dur_us", "median"))
    last = arrived[arrived["last"]].set_index(key)
    waits = arrived.groupby(key, sort=False)["wait_us"].max()
    table = first.join(last[["dur_us"]].rename(columns={"dur_us": "last_us"})).join(waits)
    matched = table["last_us"].notna()
    table["transfer_us"] = np.where(matched, table["last_us"], table["dur_us"])
    table["measured"] = np.where(matched, "transfer (last arrival to end)", "one rank: includes waiting")
    seconds = table["transfer_us"].where(table["transfer_us"] > 0) / 1e6
    table["algbw_gbs"] = table["bytes"] / seconds / 1e9
    factor = [_factor(c, n) for c, n in zip(table["collective"], table["group_size"])]
    table["busbw_gbs"] = table["algbw_gbs"] * np.array(factor, dtype=np.float64)
    table["scope"] = [scope(r, n, *nodes) for r, n in zip(table["group_ranks"], table["group_size"])]
    return table.reset_index().sort_values(["step", "name", "occurrence"], kind="stable",
                                           ignore_index=True)[BANDWIDTH_COLUMNS]


def size_warnings(kernels: pd.DataFrame) -> list[str]:
    """A warning when some communication kernels record a message size and others do not (theirs is left
    out). When none does, the empty ``bandwidth`` table says it (``NO_SIZES``)."""
    unsized = int((~np.isfinite(kernels["bytes"].to_numpy(dtype=np.float64))).sum()) if len(kernels) else 0
    if not unsized or unsized == len(kernels):
        return []
    return [f"{unsized:,} of {len(kernels):,} communication kernels record no message size (no 'Collective name' "
            "and 'In msg nelems' on the kernel or on a record_param_comms op around its launch; barriers move no "
            "data): their bus bandwidth is left out"]


def scope(group_ranks: str, group_size: float, ranks_per_node, world_size) -> str:
    """"intra-node" when every rank of the collective's group is on one node (a group of one always is), "inter-node" when they span nodes,
    "" when the trace does not tell. A rank's node is its global rank over the ranks per node (torchrun numbers
    ranks node by node); the group's ranks are its recorded ``Process Group Ranks``, else the whole job when the
    group is the world. Ranks per node: as many as the GPUs each rank's trace lists (``deviceProperties`` holds
    every GPU the process sees: all of its node's under torchrun), unknown where a trace lists one."""
    if np.isfinite(group_size) and int(group_size) == 1:
        return "intra-node"
    if not ranks_per_node or ranks_per_node < 2:
        return ""
    members = _ranks(group_ranks)
    if not members and world_size and np.isfinite(group_size) and int(group_size) == world_size:
        members = list(range(int(world_size)))
    if not members:
        return ""
    return "intra-node" if len({r // ranks_per_node for r in members}) == 1 else "inter-node"


def _ranks(text: str) -> list[int]:
    try:
        return [int(v) for v in str(text).strip("[] ").split(",") if v.strip()]
    except ValueError:
        return []


def _factor(kind: str, ranks: float) -> float:
    for _, name, _, factor in _KINDS:
        if name == kind:
            return factor(ranks) if np.isfinite(ranks) and ranks >= 1 else np.nan
    return np.nan


def link_for(devices) -> tuple | None:
    """(link name, GB/s per direction) of the GPU the ranks ran on, None when unknown or when they differ."""
    keys = {getattr(find_device(str(d)), "key", None) for d in devices}
    return LINK_GBS.get(keys.pop()) if len(keys) == 1 else None


def bandwidth_findings(table: pd.DataFrame, link: tuple | None) -> list[Finding]:
    """A finding when large collectives, timed over their transfer, move far below the link (module doc)."""
    if link is None or table.empty:
        return []
    name, gbs = link
    timed = table[(table["measured"] == "transfer (last arrival to end)") & (table["bytes"] >= LARGE_BYTES)
                  & (table["scope"] != "inter-node")]  # between nodes the link is the network's, not NVLink's
    slow = timed[timed["busbw_gbs"] < LINK_SHARE * gbs]
    if slow.empty:
        return []
    median = float(slow["busbw_gbs"].median())
    kinds = ", ".join(sorted(set(slow["collective"])))
    return [Finding("medium", f"{len(slow)} of {len(timed)} large collectives ({kinds}, >= {LARGE_BYTES >> 20} MiB) "
                    f"move at a median {median:,.1f} GB/s bus bandwidth over their transfer, under "
                    f"{LINK_SHARE:.0%} of the {gbs:,.0f} GB/s {name} figure",
                    {"collectives": int(len(slow)), "median_busbw_gbs": median, "link_gbs": gbs},
                    "Check the path NCCL chose (NCCL_DEBUG=INFO: NVLink/P2P vs SHM or NET), that the GPUs are "
                    "connected by the link and not PCIe, and whether another job shares it; NCCL_ALGO/NCCL_PROTO "
                    "and larger DDP buckets (bucket_cap_mb) help only once the path is right.",
                    f"bus bandwidth < {LINK_SHARE:.0%} of the link's per-direction figure for collectives >= "
                    f"{LARGE_BYTES >> 20} MiB timed over their transfer (perfkit rule, see bandwidth.py)")]
