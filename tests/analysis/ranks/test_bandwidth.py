"""Collective bandwidth (``perfkit.analysis.ranks.bandwidth``): bytes and bus factors as nccl-tests count them,
sizes from the kernel or the ``record_param_comms`` op around its launch, the transfer from the last arrival,
and the link rule, on small traces and on the shared traces' recorded sizes."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import shared_trace
from rankjobs import read
from perfkit.analysis.ranks import bandwidth as bw
from perfkit.analysis.ranks.combine import ranks
from perfkit.analysis.ranks.tables import reduce_file
from perfkit.cli import main
from tracebuilder import TraceBuilder

ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
NELEMS = 16 << 20  # 64 MiB of float


@pytest.mark.parametrize("recorded, kind, side, factor_of_4", [
    ("allreduce", "all-reduce", "in", 1.5), ("allreduce_coalesced", "all-reduce", "in", 1.5),
    ("_allgather_base", "all-gather", "out", 0.75), ("all_gather_into_tensor_coalesced", "all-gather", "out", 0.75),
    ("_reduce_scatter_base", "reduce-scatter", "in", 0.75), ("reduce_scatter_tensor", "reduce-scatter", "in", 0.75),
    ("all_to_allv", "all-to-all", "in", 0.75), ("all_to_all", "all-to-all", "in", 0.75),
    ("all_to_all", "all-to-all", "in", 0.75), ("broadcast", "broadcast", "in", 1.0), ("send", "send", "in", 1.0),
])
def test_collective_kinds_follow_nccl_tests(recorded, kind, side, factor_of_4):
    got = bw.collective_kind(recorded)
    assert got[:2] == (kind, side) and got[2](4) == pytest.approx(factor_of_4)


def test_a_barrier_moves_no_data():
    assert bw.collective_kind("barrier") is None


@pytest.mark.parametrize("name, algorithm", [
    (ALLREDUCE, "RING_LL"), ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "RING_LL"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "RING_SIMPLE"),
    ("ncclKernel_AllReduce_TREE_LL128_Sum_bf16(x)", "TREE_LL128"), ("ncclDevKernel_Generic(x)", ""),
])
def test_algorithm_from_the_kernel_name(name, algorithm):
    assert bw.algorithm(name) == algorithm


def _job(directory, *, on_kernel: bool, late_us: float = 1000.0, tail_us: float = 2000.0, gpu="NVIDIA A100-SXM4-80GB"):
    """Two ranks, one step, one 64 MiB float all-reduce; rank 1 arrives ``late_us`` after rank 0 and both end
    ``tail_us`` after it. Sizes on the kernel (``on_kernel``) or on a record_param_comms op around the launch."""
    args = {"Collective name": "allreduce", "In msg nelems": NELEMS, "Out msg nelems": NELEMS, "Group size": 2,
            "dtype": "Float"}
    for rank in range(2):
        b = TraceBuilder(rank=rank, gpu_name=gpu)
        arrive = 10_000 + (late_us if rank else 0.0)
        b.step(0, 0, 20_000)
        if not on_kernel:
            op = b.cpu_op("record_param_comms", 100, 50)
            op["args"].update(args)
        _, kernel = b.launch(ALLREDUCE, 120, 10, gpu_ts=arrive, gpu_dur=10_000 + late_us + tail_us - arrive)
        if on_kernel:
            kernel["args"].update(args)
        b.write(directory / f"rank{rank}.json")
    return directory


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
@pytest.mark.parametrize("on_kernel", [True, False], ids=["on the kernel", "on record_param_comms"])
def test_bytes_and_bus_bandwidth_over_the_transfer(tmp_path, on_kernel):
    result = ranks(_job(tmp_path, on_kernel=on_kernel), workers=1, use_cache=False)
    row = result.bandwidth.iloc[0]
    assert (row["collective"], row["algorithm"], row["dtype"], row["group_size"]) == ("all-reduce", "RING_LL", "Float", 2)
    assert row["bytes"] == NELEMS * 4 and row["ranks"] == 2
    assert row["transfer_us"] == 2000.0 and row["wait_us"] == 1000.0  # the last rank's kernel; rank 0 waited 1 ms
    assert row["busbw_gbs"] == pytest.approx(NELEMS * 4 / 2e-3 / 1e9 * 1.0)  # 2(n-1)/n = 1 for two ranks
    assert row["measured"] == "transfer (last arrival to end)"
    assert result.to_json()["bandwidth"][0]["bytes"] == NELEMS * 4


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_one_rank_uses_the_whole_kernel_and_says_it_is_a_floor(tmp_path):
    _job(tmp_path, on_kernel=True)
    row = ranks([tmp_path / "rank0.json"], workers=1, use_cache=False).bandwidth.iloc[0]
    assert row["transfer_us"] == 3000.0 and row["measured"] == "one rank: includes waiting" and math.isnan(row["wait_us"])


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_kernels_without_sizes_are_said_not_guessed(tmp_path, capsys):
    for rank in range(2):
        b = TraceBuilder(rank=rank)
        b.step(0, 0, 20_000)
        b.launch(ALLREDUCE, 120, 10, gpu_ts=10_000, gpu_dur=1000)
        b.launch(ALLREDUCE, 1200, 10, gpu_ts=12_000, gpu_dur=1000)
        b.write(tmp_path / f"rank{rank}.json")
    result = ranks(tmp_path, workers=1, use_cache=False)
    assert result.bandwidth.empty and not any("message size" in w for w in result.warnings)
    assert main(["ranks", str(tmp_path)]) == 0 and bw.NO_SIZES in capsys.readouterr().out
    kernels = pd.DataFrame({"bytes": [1e6, np.nan]})
    assert bw.size_warnings(kernels)[0].startswith("1 of 2 communication kernels record no message size")


def _table(busbw: float, nbytes: float, measured="transfer (last arrival to end)", scope="") -> pd.DataFrame:
    return pd.DataFrame([{"collective": "all-reduce", "bytes": nbytes, "busbw_gbs": busbw, "measured": measured,
                          "scope": scope}])


@pytest.mark.parametrize("busbw, nbytes, scope, flagged", [
    (bw.LINK_SHARE * 300.0 - 0.01, bw.LARGE_BYTES, "", True),      # under a quarter of the link, large: flagged
    (bw.LINK_SHARE * 300.0, bw.LARGE_BYTES, "", False),            # at the line: not
    (bw.LINK_SHARE * 300.0 - 0.01, bw.LARGE_BYTES - 1, "", False),  # small messages are latency-bound
    (bw.LINK_SHARE * 300.0 - 0.01, bw.LARGE_BYTES, "intra-node", True),
    (bw.LINK_SHARE * 300.0 - 0.01, bw.LARGE_BYTES, "inter-node", False),  # between nodes: the network's link
])
def test_the_link_rule(busbw, nbytes, scope, flagged):
    assert bool(bw.bandwidth_findings(_table(busbw, nbytes, scope=scope), ("NVLink 3", 300.0))) == flagged


def test_the_link_rule_ignores_one_rank_floors_and_unknown_links():
    assert not bw.bandwidth_findings(_table(1.0, bw.LARGE_BYTES, "one rank: includes waiting"), ("NVLink 3", 300.0))
    assert not bw.bandwidth_findings(_table(1.0, bw.LARGE_BYTES), None)


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_a_slow_large_all_reduce_across_ranks_is_flagged(tmp_path):
    # 64 MiB in 2 ms: 33.6 GB/s bus bandwidth on A100 NVLink 3 (300 GB/s per direction): under 75
    result = ranks(_job(tmp_path, on_kernel=True), workers=1, use_cache=False)
    titles = [f.title for f in result.findings]
    assert any("1 of 1 large collectives (all-reduce" in t and "300 GB/s NVLink 3" in t for t in titles), titles


@pytest.mark.parametrize("devices, link", [(["NVIDIA A100-SXM4-80GB"] * 2, ("NVLink 3", 300.0)),
                                           (["NVIDIA H100 PCIe"], None), (["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"], None)])
def test_link_for(devices, link):
    assert bw.link_for(devices) == link


def test_recorded_sizes_on_shared_traces():
    """Raw args: the HTA NCCL trace's first all-reduce records In msg nelems 2,049,000 Float (8,196,000 bytes) on
    2 ranks; the B200 all-gather records Out msg nelems 201,088 BFloat16 on 8 ranks (402,176 bytes, 21.953 us)."""
    hta = ranks([shared_trace("hta_nccl_parser_config__nccl_data.json.gz")], workers=1).bandwidth
    first = hta.iloc[0]
    assert (first["collective"], first["bytes"], first["group_size"]) == ("all-reduce", 8_196_000, 2)
    assert len(hta) == 21 and (hta["algorithm"] == "RING_LL").all()
    b200 = ranks([shared_trace("tracelens_b200_serving_eager_rank0.json.gz")], workers=1).bandwidth.iloc[0]
    assert (b200["collective"], b200["bytes"]) == ("all-gather", 402_176)
    assert b200["busbw_gbs"] == pytest.approx(402_176 / 21.953e-6 / 1e9 * 7 / 8)
    assert np.isfinite(b200["busbw_gbs"])


def test_the_ddp_rank_reads_sizes_from_record_param_comms():
    """MI300X ResNet DDP: RCCL's Generic kernels record nothing; the record_param_comms op around each launch
    records the all-reduce (BFloat16, 8 ranks): 8,816,192 elements = 17,632,384 bytes in step 17."""
    table = ranks([shared_trace("tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz")], workers=1).bandwidth
    assert 17_632_384 in set(table.loc[table["collective"] == "all-reduce", "bytes"])
    assert set(table["group_size"]) == {8}


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_the_report_names_the_largest_collective_and_whether_its_figure_is_a_floor(tmp_path):
    from perfkit.report.ranks import ranks_text

    text = ranks_text(ranks(_job(tmp_path, on_kernel=True), workers=1, use_cache=False))
    assert "an all-reduce of 67.1 MB (Float, 2 ranks), moves at 33.6 GB/s bus bandwidth over 2.00 ms, from the last " \
           "rank's arrival" in text
    one = ranks_text(ranks([tmp_path / "rank0.json"], workers=1, use_cache=False))
    assert "22.4 GB/s bus bandwidth over 3.00 ms (one rank's kernel, which includes its wait" in one


SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_a_moe_all_to_allv_is_a_collective(tmp_path):
    """A 2-rank MoE dispatch: 12 all_to_allv per step, 2,048 float elements (8,192 bytes) each rank, on NCCL's
    SendRecv kernel; the sizes on the record_param_comms op around each launch."""
    for rank in range(2):
        b = TraceBuilder(rank=rank)
        b.step(0, 0, 20_000)
        for i in range(12):
            op = b.cpu_op("record_param_comms", 100 + 1000 * i, 50)
            op["args"].update({"Collective name": "all_to_allv", "In msg nelems": 2048, "Out msg nelems": 2048,
                               "Group size": 2, "dtype": "Float"})
            b.launch(SENDRECV, 110 + 1000 * i, 10, gpu_ts=500 + 1000 * i + 30 * rank, gpu_dur=100 - 30 * rank)
        b.write(tmp_path / f"rank{rank}.json")
    table = ranks(tmp_path, workers=1, use_cache=False).bandwidth
    assert len(table) == 12 and set(table["collective"]) == {"all-to-all"} and set(table["bytes"]) == {8192}
    assert set(table["transfer_us"]) == {70.0} and set(table["wait_us"]) == {30.0}  # rank 1 arrives 30 us late


DDP = "tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz"
DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Int": 4, "Long": 8}


def test_a_ddp_ranks_collectives_belong_to_the_step_that_launched_them():
    """MI300X ResNet DDP rank 0: its GPU runs a step behind its host, so the all-reduces of the last step run after
    that step's window and the first window holds the previous step's tail (no launch in the trace). By hand from
    the raw events: each RCCL kernel's launch (correlation), the ProfilerStep# around the launch, the size from the
    record_param_comms op around it (In msg nelems x dtype size). By time, 9 of them were counted (5 the previous
    step's tail, and step 15's labelled 16 and 17) and the 8 of steps 16-17 were missing."""
    events = read(shared_trace(DDP))["traceEvents"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"
                and "correlation" in (e.get("args") or {})}
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"]
    comms = [e for e in events if e.get("name") == "record_param_comms" and e.get("ph") == "X"]

    def around(spans, call, thread=True):  # the span holding the call (on its thread: an op; a step, any thread)
        return [s for s in spans if (s["tid"] == call["tid"] or not thread) and s["ts"] <= call["ts"] <= s["ts"] + s["dur"]]

    expected = []
    for k in events:
        if k.get("cat") == "kernel" and "nccl" in k["name"].lower() and k["args"].get("correlation") in launches:
            call = launches[k["args"]["correlation"]]
            (step,), (op,) = around(steps, call, thread=False), around(comms, call)
            expected.append((int(step["name"].split("#")[1]), op["args"]["In msg nelems"] * DTYPE_BYTES[op["args"]["dtype"]]))
    table = reduce_file(shared_trace(DDP)).collectives
    assert len(expected) == 12 and sorted(zip(table["step"], table["bytes"])) == sorted(expected)


@pytest.mark.parametrize("group_ranks, group_size, per_node, world, where", [
    ("[0, 1, 2, 3, 4, 5, 6, 7]", 8, 8, 8, "intra-node"),
    ("[0, 1, 2, 3, 4, 5, 6, 7, 8]", 9, 8, 16, "inter-node"),   # one rank past the node
    ("[8, 9]", 2, 8, 16, "intra-node"),                      # the second node's own pair
    ("", 16, 8, 16, "inter-node"),                            # no ranks recorded, but the group is the world
    ("", 8, 8, 16, ""),                                      # a group of 8 of 16: which 8, the trace does not say
    ("[0, 1]", 2, None, 2, ""), ("[0, 1]", 2, 1, 2, ""),      # a trace that sees one GPU does not tell
    ("[]", 1, None, 8, "intra-node"),                        # one rank: one node
])
def test_the_scope_of_a_collective(group_ranks, group_size, per_node, world, where):
    assert bw.scope(group_ranks, group_size, per_node, world) == where


@pytest.mark.slow  # end to end through ranks() or the CLI: the mutation run leaves it out
def test_collectives_are_split_intra_and_inter_node_where_the_traces_tell(tmp_path):
    """Four ranks on two nodes of two GPUs each (each trace lists its node's two GPUs): an all-reduce among the
    node's pair is intra-node, one among all four inter-node, and only the intra-node one is held to NVLink."""
    for rank in range(4):
        b = TraceBuilder(rank=rank, gpu_name="NVIDIA A100-SXM4-80GB")
        b.device_properties([{"id": i, "name": "NVIDIA A100-SXM4-80GB"} for i in range(2)])
        b.step(0, 0, 50_000)
        for i, group in enumerate(([2 * (rank // 2), 2 * (rank // 2) + 1], [0, 1, 2, 3])):
            op = b.cpu_op("record_param_comms", 100 + 20_000 * i, 50)
            op["args"].update({"Collective name": "allreduce", "In msg nelems": NELEMS, "Out msg nelems": NELEMS,
                               "Group size": len(group), "dtype": "Float", "Process Group Ranks": str(group)})
            b.launch(ALLREDUCE, 120 + 20_000 * i, 10, gpu_ts=1000 + 20_000 * i, gpu_dur=15_000)  # slow: 9 GB/s
        doc = b.to_dict()
        doc["distributedInfo"] = {"rank": rank, "world_size": 4}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(doc))
    r = ranks(tmp_path, workers=1, use_cache=False)
    assert list(r.bandwidth.sort_values("occurrence")["scope"]) == ["intra-node", "inter-node"]
    (slow,) = [f for f in r.findings if "bus bandwidth" in f.title]
    assert slow.evidence["collectives"] == 1  # the inter-node one runs over the network, not NVLink


def test_the_ddp_ranks_collectives_are_intra_node_as_its_trace_tells():
    """MI300X DDP rank 0: deviceProperties lists 8 GPUs, world_size 8, each record_param_comms names ranks 0-7, or
    none in a group of one rank (on one node by definition)."""
    doc = read(shared_trace(DDP))
    groups = {(e["args"]["Process Group Ranks"], e["args"]["Group size"]) for e in doc["traceEvents"]
              if e.get("name") == "record_param_comms"}
    assert len(doc["deviceProperties"]) == 8 and doc["distributedInfo"]["world_size"] == 8
    assert groups == {("[0, 1, 2, 3, 4, 5, 6, 7]", 8), ("[]", 1)}
    table = ranks([shared_trace(DDP)], workers=1).bandwidth
    assert len(table) == 12 and set(table["scope"]) == {"intra-node"}


# -- the bus factor of each collective (NCCL's PERFORMANCE.md), its recorded names, the ranks list -----------------
@pytest.mark.parametrize("kind, factor", [
    ("all-reduce", 1.5), ("all-gather", 0.75), ("reduce-scatter", 0.75), ("all-to-all", 0.75), ("broadcast", 1.0),
    ("reduce", 1.0), ("send", 1.0), ("recv", 1.0), ("gather", 0.75), ("scatter", 0.75),
])
def test_the_bus_factor_of_each_collective_on_four_ranks(kind, factor):
    assert bw._factor(kind, 4.0) == factor


@pytest.mark.parametrize("kind, ranks", [("all-reduce", float("nan")), ("all-reduce", 0.5), ("barrier", 4.0)])
def test_no_bus_factor_without_a_rank_count_or_for_an_unknown_kind(kind, ranks):
    assert math.isnan(bw._factor(kind, ranks))


def test_one_rank_moves_nothing_over_the_bus():
    assert bw._factor("all-reduce", 1.0) == 0.0 and bw._factor("broadcast", 1.0) == 1.0


@pytest.mark.parametrize("recorded, kind, side", [
    ("allreduce", "all-reduce", "in"), ("_allgather_base", "all-gather", "out"),
    ("reduce_scatter_tensor_coalesced", "reduce-scatter", "in"), ("all_gather_into_tensor", "all-gather", "out"),
    ("all_to_all", "all-to-all", "in"), ("alltoallv", "all-to-all", "in"), ("recv", "recv", "out"),
    ("AllReduce", "all-reduce", "in"),
])
def test_recorded_collective_names(recorded, kind, side):
    assert bw.collective_kind(recorded)[:2] == (kind, side)


@pytest.mark.parametrize("recorded", ["barrier", "", "mystery"])
def test_a_collective_that_moves_no_data_or_is_unknown_has_no_kind(recorded):
    assert bw.collective_kind(recorded) is None


@pytest.mark.parametrize("text, ranks", [("[0, 1, 2]", [0, 1, 2]), ("[]", []), ("", []), ("[0, x]", []), ("3", [3])])
def test_the_ranks_a_group_lists(text, ranks):
    assert bw._ranks(text) == ranks


# -- fast table tests of each function on small frames (the mutation run's own-file evidence) ----------------------
AG_KERNEL = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GENERIC = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"


def test_kernel_messages_from_the_kernel_or_the_op_around_its_launch(tmp_path):
    """Sizes on the kernel (an all-gather: the output side); on a record_param_comms op two levels above the launch
    (an all-reduce: the input side); none at all; a barrier (moves no data, but its dtype and group are kept)."""
    from perfkit.analysis.classify import is_comm
    from perfkit.trace import load_trace

    b = TraceBuilder(rank=0)
    b.step(0, 0, 20_000)
    _, kernel = b.launch(AG_KERNEL, 100, 10, gpu_ts=1000, gpu_dur=100)
    kernel["args"].update({"Collective name": "_allgather_base", "In msg nelems": 100, "Out msg nelems": 400,
                           "Group size": 4, "dtype": "Half", "Process Group Ranks": "[0, 1, 2, 3]"})
    op = b.cpu_op("record_param_comms", 300, 100)
    op["args"].update({"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 10,
                       "Group size": 2, "dtype": "BFloat16"})
    b.cpu_op("c10d::allreduce_", 310, 80)
    b.launch(ALLREDUCE, 320, 10, gpu_ts=2000, gpu_dur=100)
    b.launch(GENERIC, 500, 10, gpu_ts=3000, gpu_dur=100)
    op = b.cpu_op("record_param_comms", 600, 100)
    op["args"].update({"Collective name": "barrier", "In msg nelems": 1, "Out msg nelems": 1, "Group size": 2,
                       "dtype": "Float"})
    b.launch(ALLREDUCE, 610, 10, gpu_ts=4000, gpu_dur=100)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    kernels = trace.kernels()
    comm = kernels[is_comm(kernels["name"])]
    out = bw.kernel_messages(trace, comm)
    assert list(out.columns) == bw.MESSAGE_COLUMNS and list(out.index) == list(comm.index)
    rows = [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r) for r in out.itertuples(index=False)]
    assert rows == [("all-gather", "RING_LL", "Half", 4.0, "[0, 1, 2, 3]", 400 * 2.0),
                    ("all-reduce", "RING_LL", "BFloat16", 2.0, "", 1000 * 2.0),
                    ("", "", "", None, "", None),
                    ("", "RING_LL", "Float", 2.0, "", None)]
    alone = bw.kernel_messages(trace, comm.iloc[[0]])
    assert list(alone["bytes"]) == [800.0]


def test_kernel_messages_when_nothing_records_a_size(tmp_path):
    from perfkit.analysis.classify import is_comm
    from perfkit.trace import load_trace

    b = TraceBuilder(rank=0)
    b.step(0, 0, 20_000)
    b.launch(ALLREDUCE, 100, 10, gpu_ts=1000, gpu_dur=100)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    kernels = trace.kernels()
    out = bw.kernel_messages(trace, kernels[is_comm(kernels["name"])])
    assert list(out["collective"]) == [""] and math.isnan(out["bytes"].iloc[0]) and list(out["algorithm"]) == ["RING_LL"]


def _kernels(*rows) -> pd.DataFrame:
    cols = ["step", "name", "occurrence", "file_id", "dur_us", "collective", "algorithm", "dtype", "group_size",
            "group_ranks", "bytes"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows], columns=cols)


def test_bandwidth_table_of_matched_and_single_rank_collectives():
    """An all-reduce matched on two ranks (the last arrival's kernel 2 ms, rank 0 waited 1 ms); an all-gather of 4
    ranks seen on one rank (its whole 4 ms kernel, a floor); a kernel of no known size (left out); step 0 sorts first."""
    kernels = _kernels((1, "ar", 0, 0, 3000.0, "all-reduce", "RING_LL", "Float", 2.0, "[0, 1]", 8e6),
                       (1, "ar", 0, 1, 2000.0, "all-reduce", "RING_LL", "Float", 2.0, "[0, 1]", 8e6),
                       (0, "ag", 0, 0, 4000.0, "all-gather", "", "Half", 4.0, "", 4e6),
                       (0, "x", 0, 0, 100.0, "", "", "", float("nan"), "", float("nan")))
    arrived = pd.DataFrame({"step": [1, 1], "name": ["ar", "ar"], "occurrence": [0, 0], "last": [False, True],
                            "wait_us": [1000.0, 0.0], "dur_us": [3000.0, 2000.0]})
    table = bw.bandwidth_table(kernels, arrived, (2, 4))
    assert list(table.columns) == bw.BANDWIDTH_COLUMNS
    ag, ar = table.to_dict("records")
    assert (ag["step"], ag["collective"], ag["ranks"], ag["transfer_us"]) == (0, "all-gather", 1, 4000.0)
    assert ag["measured"] == "one rank: includes waiting" and math.isnan(ag["wait_us"])
    assert ag["scope"] == "inter-node"  # no ranks recorded, a group of the world's 4 on nodes of 2
    assert ag["algbw_gbs"] == pytest.approx(4e6 / 4e-3 / 1e9) and ag["busbw_gbs"] == pytest.approx(1.0 * 3 / 4)
    assert (ar["step"], ar["name"], ar["occurrence"], ar["algorithm"], ar["dtype"]) == (1, "ar", 0, "RING_LL", "Float")
    assert (ar["ranks"], ar["transfer_us"], ar["wait_us"], ar["bytes"]) == (2, 2000.0, 1000.0, 8e6)
    assert ar["measured"] == "transfer (last arrival to end)" and ar["scope"] == "intra-node" and ar["group_size"] == 2
    assert ar["algbw_gbs"] == pytest.approx(4.0) and ar["busbw_gbs"] == pytest.approx(4.0 * 2 * (2 - 1) / 2)


def test_bandwidth_table_medians_a_single_ranks_kernels_and_times_zero_as_unknown():
    kernels = _kernels((0, "b", 0, 0, 1000.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (0, "b", 0, 1, 3000.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (0, "b", 0, 2, 2500.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (0, "z", 0, 0, 0.0, "broadcast", "", "Float", 2.0, "", 1e6))
    arrived = pd.DataFrame({"step": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object),
                            "occurrence": pd.Series(dtype=np.int64), "last": pd.Series(dtype=bool),
                            "wait_us": pd.Series(dtype=float), "dur_us": pd.Series(dtype=float)})
    b, z = bw.bandwidth_table(kernels, arrived).to_dict("records")
    assert b["ranks"] == 3 and b["transfer_us"] == 2500.0 and b["busbw_gbs"] == pytest.approx(1e6 / 2.5e-3 / 1e9)
    assert z["transfer_us"] == 0.0 and math.isnan(z["algbw_gbs"]) and math.isnan(z["busbw_gbs"])


def test_bandwidth_table_without_sizes_is_empty_with_its_columns():
    kernels = _kernels((0, "x", 0, 0, 100.0, "", "", "", float("nan"), "", float("nan")))
    table = bw.bandwidth_table(kernels, pd.DataFrame(columns=["step", "name", "occurrence", "last", "wait_us", "dur_us"]))
    assert table.empty and list(table.columns) == bw.BANDWIDTH_COLUMNS


@pytest.mark.parametrize("sizes, warned", [([], None), ([1.0, 2.0], None), ([np.nan, np.nan], None),
                                           ([1.0, np.nan, np.nan], "2 of 3"), ([np.inf, 1.0], "1 of 2")])
def test_size_warnings_table(sizes, warned):
    out = bw.size_warnings(pd.DataFrame({"bytes": pd.Series(sizes, dtype=np.float64)}))
    if warned is None:
        assert out == []
    else:
        assert out == [f"{warned} communication kernels record no message size (no 'Collective name' and 'In msg "
                       "nelems' on the kernel or on a record_param_comms op around its launch; barriers move no data): "
                       "their bus bandwidth is left out"]


@pytest.mark.parametrize("kind, ranks, factor", [("all-reduce", 1.0, 0.0), ("all-gather", 8.0, 7 / 8),
                                                 ("send", 2.0, 1.0), ("", 4.0, None), ("all-reduce", 0.99, None)])
def test_the_bus_factor_at_its_edges(kind, ranks, factor):
    got = bw._factor(kind, ranks)
    assert (math.isnan(got) if factor is None else got == pytest.approx(factor))


def test_the_link_finding_says_the_numbers():
    table = pd.concat([_table(40.0, bw.LARGE_BYTES), _table(60.0, 2 * bw.LARGE_BYTES),
                       _table(200.0, bw.LARGE_BYTES), _table(1.0, bw.LARGE_BYTES - 1)], ignore_index=True)
    table.loc[1, "collective"] = "all-gather"
    (finding,) = bw.bandwidth_findings(table, ("NVLink 3", 300.0))
    assert finding.severity == "medium"
    assert finding.title == ("2 of 3 large collectives (all-gather, all-reduce, >= 16 MiB) move at a median 50.0 GB/s "
                             "bus bandwidth over their transfer, under 25% of the 300 GB/s NVLink 3 figure")
    assert finding.evidence == {"collectives": 2, "median_busbw_gbs": 50.0, "link_gbs": 300.0}
    assert "NCCL_DEBUG=INFO" in finding.fix
    assert finding.threshold == "bus bandwidth < 25% of the link's per-direction figure for collectives >= 16 MiB timed " \
                           "over their transfer (perfkit rule, see bandwidth.py)"
    assert bw.bandwidth_findings(table.iloc[:0], ("NVLink 3", 300.0)) == []


def test_kernel_messages_walks_to_the_nearest_recording_op(tmp_path):
    """A record_param_comms that is the trace's first event (label 0) around a launch; two nested ones around
    another (the inner, nearest, gives the size); a kernel with no launch call in the trace (no op to walk from)."""
    from perfkit.analysis.classify import is_comm
    from perfkit.trace import load_trace

    def recorded(b, ts, dur, nelems):
        op = b.cpu_op("record_param_comms", ts, dur)
        op["args"].update({"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                           "Group size": 2, "dtype": "Float"})

    b = TraceBuilder(rank=0)
    recorded(b, 0, 100, 1)
    b.launch(ALLREDUCE, 10, 5, gpu_ts=1000, gpu_dur=100)
    recorded(b, 200, 100, 2)
    recorded(b, 210, 80, 3)
    b.launch(ALLREDUCE, 220, 5, gpu_ts=2000, gpu_dur=100)
    b.kernel(ALLREDUCE, 3000, 100)
    b.step(0, 500, 20_000)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    assert trace.events["name"].iloc[0] == "record_param_comms"
    kernels = trace.kernels()
    out = bw.kernel_messages(trace, kernels[is_comm(kernels["name"])])
    assert list(out["bytes"].fillna(-1)) == [4.0, 12.0, -1] and list(out["collective"]) == ["all-reduce"] * 2 + [""]
    assert out["group_size"].dtype == np.float64


def _no_arrivals() -> pd.DataFrame:
    return pd.DataFrame({"step": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object),
                         "occurrence": pd.Series(dtype=np.int64), "last": pd.Series(dtype=bool),
                         "wait_us": pd.Series(dtype=float), "dur_us": pd.Series(dtype=float)})


def test_bandwidth_table_orders_by_step_name_and_occurrence():
    kernels = _kernels((1, "b", 0, 0, 100.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (1, "a", 1, 0, 100.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (1, "a", 0, 0, 100.0, "broadcast", "", "Float", 2.0, "", 1e6),
                       (0, "z", 0, 0, 100.0, "broadcast", "", "Float", 2.0, "", 1e6))
    table = bw.bandwidth_table(kernels, _no_arrivals())
    assert list(zip(table["step"], table["name"], table["occurrence"])) == [(0, "z", 0), (1, "a", 0), (1, "a", 1),
                                                                            (1, "b", 0)]
    assert list(table.index) == [0, 1, 2, 3]


@pytest.mark.parametrize("transfer_us, timed", [(1.0, True), (0.5, True), (0.0, False)])
def test_a_transfer_of_any_time_above_zero_has_a_rate(transfer_us, timed):
    kernels = _kernels((0, "b", 0, 0, transfer_us, "broadcast", "", "Float", 2.0, "", 1e6))
    row = bw.bandwidth_table(kernels, _no_arrivals()).iloc[0]
    assert (row["algbw_gbs"] == pytest.approx(1e6 / (transfer_us / 1e6) / 1e9)) if timed else np.isnan(row["algbw_gbs"])


def test_the_link_finding_tells_how_to_fix_it():
    (finding,) = bw.bandwidth_findings(_table(1.0, bw.LARGE_BYTES), ("NVLink 3", 300.0))
    assert finding.fix == ("Check the path NCCL chose (NCCL_DEBUG=INFO: NVLink/P2P vs SHM or NET), that the GPUs are "
                           "connected by the link and not PCIe, and whether another job shares it; NCCL_ALGO/NCCL_PROTO "
                           "and larger DDP buckets (bucket_cap_mb) help only once the path is right.")


def test_the_ranks_of_a_group_with_brackets_inside():
    assert bw._ranks(" [4, 5] ") == [4, 5] and bw._ranks("X[1]X") == []


def test_the_rates_exactly():
    kernels = _kernels((0, "b", 0, 0, 4000.0, "all-gather", "", "Float", 4.0, "", 4e6))
    row = bw.bandwidth_table(kernels, _no_arrivals()).iloc[0]
    assert row["algbw_gbs"] == 4e6 / (4000.0 / 1e6) / 1e9 and row["busbw_gbs"] == row["algbw_gbs"] * (3 / 4)


def test_no_link_for_an_unknown_gpu():
    assert bw.link_for(["NVIDIA Mystery"]) is None and bw.link_for([]) is None


class _LaunchTrace:
    """Labels 0-3: a recording op (0) around a launch (1), an op (2) around two launches (3); kernels 4, 5, 6:
    kernel 4 listed twice (its first launch is 1), kernel 6 launched by nothing."""
    events = pd.DataFrame({"parent": [-1, 0, -1, 2, -1, -1, -1]})

    def launches(self, kinds):
        assert kinds == ("kernel",)
        return pd.DataFrame({"gpu_index": [4, 4, 5], "cpu_index": [1, 3, 3]})


def test_recorded_ancestor_of_each_kernel_or_none():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a kernel with no launch is -1, never a NaN cast to a label
        out = bw._recorded_ancestor(_LaunchTrace(), pd.Index([4, 5, 6]), pd.Index([0]))
    assert list(out) == [0, -1, -1]
