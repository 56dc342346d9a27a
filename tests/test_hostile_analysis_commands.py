"""Fuzz round 2, the commands that landed with it: ``diagnose``, ``kernels``, ``memory``,
``critical-path`` and ``gaps`` on generated traces of odd but valid shape (zero and huge durations,
ties, events outside every step, ops without shapes, kernels without launches, collectives, memory
events, several threads): each answers cleanly (exit 0, strict JSON) or refuses in one line."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from fuzzkit import run_main

NAMES = ["aten::mm", "aten::add", "aten::normal_", "aten::empty", "aten::item", "aten::linear",
         "autograd::engine::evaluate_function: MmBackward0", "aten::addmm", "aten::_local_scalar_dense"]
KERNELS = ["sm90_xmma_gemm_bf16bf16_bf16f32", "ampere_sgemm_128x64_nn", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
           "void at::native::vectorized_elementwise_kernel<4>", "triton_poi_fused_add_0", "Memcpy HtoD (Pageable -> Device)"]
RUNTIME = ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync", "hipLaunchKernel"]

event = st.fixed_dictionaries({
    "kind": st.sampled_from(["op", "launch", "kernel", "sync", "memory", "step", "python"]),
    "ts": st.integers(0, 20_000), "dur": st.sampled_from([0, 1, 5, 50, 500, 5_000, 400_000]),
    "tid": st.sampled_from([1, 2, 3]), "name": st.integers(0, 100), "dims": st.booleans()})


def _trace(events: list[dict]) -> dict:
    out, corr = [], 1
    for e in events:
        corr += 1
        base = {"ph": "X", "pid": 1, "tid": e["tid"], "ts": 1_000_000 + e["ts"], "dur": e["dur"]}
        kind = e["kind"]
        if kind == "step":
            out.append(dict(base, cat="user_annotation", name=f"ProfilerStep#{e['name']}", tid=1))
        elif kind == "op":
            args = {"External id": corr}
            if e["dims"]:
                args.update({"Input Dims": [[e["name"] + 1, 64], [64, 32]], "Input type": ["float", "c10::BFloat16"]})
            out.append(dict(base, cat="cpu_op", name=NAMES[e["name"] % len(NAMES)], args=args))
        elif kind in ("launch", "sync"):
            name = RUNTIME[e["name"] % len(RUNTIME)] if kind == "launch" else "cudaStreamSynchronize"
            out.append(dict(base, cat="cuda_runtime", name=name, args={"correlation": corr}))
        elif kind == "kernel":
            name = KERNELS[e["name"] % len(KERNELS)]
            cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
            out.append(dict(base, cat=cat, name=name, pid=0, tid=7 + e["name"] % 2,
                            args={"correlation": corr - (e["name"] % 3), "device": 0, "stream": 7 + e["name"] % 2}))
        elif kind == "memory":
            out.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": e["tid"],
                        "ts": 1_000_000 + e["ts"], "s": "t",
                        "args": {"Device Type": 1, "Device Id": 0, "Bytes": (e["name"] - 50) * 4096,
                                 "Total Allocated": max(e["name"], 0) * 4096, "Total Reserved": 2**22}})
        else:
            out.append(dict(base, cat="python_function", name=f"train.py({e['name']}): f{e['name'] % 4}",
                            args={"Python id": corr, "Python parent id": None}))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": out}


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.generate])  # the same cases every run, as the other fuzz tests; no shrinking
@given(events=st.lists(event, min_size=1, max_size=60))
# found by the generator: the only host event lasts 0 us, so the replay's host graph held no time and its cut crashed
@example(events=[{"tid": 2, "dur": 0, "kind": "sync", "ts": 1102, "name": 34, "dims": True},
                 {"ts": 11427, "name": 50, "tid": 1, "dur": 500, "dims": True, "kind": "kernel"}])
# ... and a thread whose only event lasts 0 us beside threads that work: its segments' span was empty
@example(events=[{"ts": 191, "dur": 50, "kind": "memory", "dims": False, "tid": 2, "name": 58},
                 {"dims": True, "ts": 2210, "kind": "op", "tid": 1, "name": 73, "dur": 5},
                 {"dur": 0, "ts": 2987, "tid": 3, "kind": "op", "name": 82, "dims": False},
                 {"dur": 50, "kind": "op", "dims": False, "name": 44, "tid": 1, "ts": 75},
                 {"ts": 4800, "dims": True, "name": 94, "dur": 50, "tid": 3, "kind": "kernel"}])
# ... and a zero-length kernel on the host's thread whose links ran backwards in the graph's order
@example(events=[{"kind": "kernel", "tid": 2, "dims": False, "name": 9, "dur": 5, "ts": 291},
                 {"dur": 500, "kind": "sync", "name": 59, "dims": False, "ts": 2630, "tid": 1},
                 {"kind": "kernel", "tid": 2, "name": 1, "ts": 1898, "dur": 5, "dims": False},
                 {"dur": 0, "ts": 699, "dims": False, "tid": 1, "kind": "kernel", "name": 61},
                 {"ts": 3656, "tid": 1, "dims": True, "kind": "op", "dur": 1, "name": 6}])
def test_new_commands_answer_generated_traces_cleanly(tmp_path, events):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace(events)))
    for command in ("diagnose", "whatif", "kernels", "memory", "critical-path", "gaps"):
        outcome = run_main(command, str(path), "--json")
        outcome.assert_clean(json_out=outcome.rc == 0, codes=(0, 2))
        if outcome.rc == 2:
            assert len(outcome.err.strip().splitlines()) == 1, outcome.why()


PROFILE_CASES = [  # (perfkit profile arguments before the script, what the one-line refusal says)
    (["--wait", "-1"], "wait=-1"), (["--active", "0"], "active=0"), (["--repeat", "0"], "repeat=0"),
    (["--seconds", "-1"], "seconds=-1"), (["--seconds", "nan"], "seconds=nan"),
    (["--step", "not a name"], "module:function"), (["--step", "mod:"], "module:function"),
    (["--step", "plan", "--seconds", "1"], "not both"), (["--step", "no_such_module_xyz:f"], "does not import"),
]


@pytest.mark.parametrize("options, needle", PROFILE_CASES, ids=[" ".join(c[0]) for c in PROFILE_CASES])
def test_profile_refuses_bad_options_in_one_line(tmp_path, options, needle):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    outcome = run_main("profile", *options, str(script))
    outcome.assert_clean(codes=(2,))
    assert len(outcome.err.strip().splitlines()) == 1 and needle in outcome.err, outcome.why()
    assert "ran" not in outcome.out  # refused before the script ran


def test_profile_of_a_missing_or_failing_script(tmp_path):
    missing = run_main("profile", str(tmp_path / "nope.py"))
    missing.assert_clean(codes=(2,))
    assert "nope.py" in missing.err and "not found" in missing.err
    failing = tmp_path / "boom.py"
    failing.write_text("raise RuntimeError('boom')\n")
    outcome = run_main("profile", "--out", str(tmp_path / "t"), str(failing))
    outcome.assert_clean(codes=(1,))
    assert "boom" in outcome.err
