"""step_anatomy: the one-sentence explanation of a step, exact on a synthetic trace and sensible on
real ones (GPU, CPU-only, no stacks)."""
import pytest

from perfkit.analysis.step.anatomy import step_anatomy
from perfkit.trace import load_trace

from conftest import ROOT, shared_trace
from tracebuilder import TraceBuilder


def test_sentence_names_the_python_the_wait_and_the_gpu(tmp_path):
    b = TraceBuilder(with_stack=True)
    for k in range(2):
        t0 = 1000 * k
        b.step(k, t0, 1000)
        b.python("train.py(10): step", t0, 1000)
        b.python("train.py(30): reward", t0 + 10, 400)                 # 400 us of Python
        b.launch("gemm", t0 + 420, 10, t0 + 440, 300)                  # GPU 440-740
        b.python("train.py(50): log", t0 + 450, 320)
        b.cpu_op("aten::item", t0 + 460, 300)
        b.cpu_op("aten::_local_scalar_dense", t0 + 461, 298)
        b.memcpy("DtoH", "Pageable", t0 + 462, 5, t0 + 740, 2, 4)
        b.sync("cudaStreamSynchronize", t0 + 470, 280, gpu_kind="Stream Sync")
    a = step_anatomy(load_trace(b.write(tmp_path / "a.json")))
    assert a.steps == 2 and a.wall_us == 1000.0
    assert a.python == {"function": "reward", "python": True, "file": "train.py", "line": 30,
                        "self_per_step_us": 400.0}
    assert a.waiting["file"] == "train.py" and a.waiting["line"] == 50 and a.waiting["blocked_per_step_us"] == 300.0
    assert a.gpu_busy_us == 302.0 and a.gpu_idle_us == 698.0
    # 400 us of Python that launches nothing outweighs the 300 us sync: the host's own work bounds the step
    assert a.verdict == "host-compute-bound" and a.sentence.startswith("host-compute-bound; step 1.00 ms: 0.40 ms Python in reward (train.py:30), 0.30 ms waiting for the "
                                 "GPU at train.py:50 (log), GPU busy 0.30 ms and idle 0.70 ms (mostly ")
    assert "; critical path" in a.sentence and a.to_json()["sentence"] == a.sentence


def test_cpu_only_workload_trace_says_there_is_no_gpu():
    a = step_anatomy(load_trace(ROOT / "data" / "traces" / "cpu" / "ppo_item_logging.json.gz"))
    assert "ms in torch._C._EngineBase.run_backward (native code called from Python)" in a.sentence
    # the loop's own frames hold no work (layers.working_frames): the 1.35 ms between the ops is untraced, idle
    assert "no GPU timeline" in a.sentence and "critical path 99% host" in a.sentence and a.bound_by == "host"
    assert a.critical_path["kernel"] == a.critical_path["launch"] == 0.0


def test_a_built_in_frame_is_not_called_python():
    """Autograd's engine is C++ the Python called (its frame has no source file): not "Python in"."""
    sentence = step_anatomy(load_trace(ROOT / "data" / "traces" / "gpu" / "small_mlp_eager.pt.trace.json.gz")).sentence
    assert "ms in torch._C._EngineBase.run_backward (native code called from Python)" in sentence, sentence
    assert "Python in torch._C" not in sentence


@pytest.mark.parametrize("name, words", [
    ("tracelens_b200_serving_eager_rank0.json.gz", ["in _disabled_torch_function_impl (native code called from Python)", "GPU busy",
                                                   "mostly host_python"]),
    ("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz", ["host time in op", "mostly input"]),
])
def test_real_traces(name, words):
    sentence = step_anatomy(load_trace(shared_trace(name))).sentence
    assert all(w in sentence for w in words), sentence
