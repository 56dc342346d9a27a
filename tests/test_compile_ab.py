import inspect
import math

import pytest

torch = pytest.importorskip("torch")

from perfkit.bench.compare import compare  # noqa: E402
from perfkit.bench.compile_ab import compile_ab  # noqa: E402
from perfkit.bench.compile_ab_result import CompileABResult, GraphBreak, Recompile  # noqa: E402
from perfkit.stats import VERDICTS
from perfkit.errors import ParameterError  # noqa: E402

FAST = dict(steps=20, warmup=2)


class Branchy(torch.nn.Module):
    """A tiny MLP with a planted data-dependent branch (a graph break)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.a(x).relu()
        if h.sum() > 0:  # planted graph break
            h = h * 2
        return self.b(h)


class Chatty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 4)

    def forward(self, x):
        print("", end="")  # planted graph break
        return self.a(x).tanh()


def _tiny_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_data_dependent_branch_is_a_graph_break_with_reason_and_location():
    result = compile_ab(Branchy(), torch.randn(4, 8), backend="eager", **FAST)
    assert result.graph_break_count == 1
    brk = result.graph_breaks[0]
    assert "data-dependent" in brk.reason.lower()
    lines, first = inspect.getsourcelines(Branchy.forward)
    planted = first + next(i for i, line in enumerate(lines) if "if h.sum()" in line)
    assert brk.location == f"{__file__}:{planted}"
    assert brk.code == "if h.sum() > 0:  # planted graph break"
    assert "torch.cond" in brk.detail or "torch.where" in brk.detail
    assert result.findings[0].severity == "high" and "graph break" in result.findings[0].title
    assert result.recompile_count == 0


def test_print_is_a_graph_break():
    result = compile_ab(Chatty(), torch.randn(4, 8), backend="eager", **FAST)
    assert result.graph_break_count == 1
    assert "print" in result.graph_breaks[0].detail + result.graph_breaks[0].reason
    assert result.graph_breaks[0].code.startswith("print(")


def test_changing_batch_sizes_are_counted_as_recompiles():
    variants = [torch.randn(8, 8), torch.randn(16, 8), torch.randn(3, 8)]
    result = compile_ab(Branchy(), torch.randn(4, 8), backend="eager", shape_variants=variants, **FAST)
    # 4 -> 8 recompiles both frames (the forward and the code resumed after the break) with a
    # dynamic batch dim; 16 and 3 then reuse it.
    assert result.recompile_count == 2
    assert all("size mismatch" in r.reason for r in result.recompiles)
    assert {r.compile_id for r in result.recompiles} == {"0/1", "1/1"}
    assert any("forward" in r.function for r in result.recompiles)
    assert len(result.variant_call_s) == 3
    titles = [f.title for f in result.findings]
    assert any("recompile" in t for t in titles)
    frame = result.to_frame()
    assert frame["kind"].value_counts().to_dict() == {"recompile": 2, "graph_break": 1}


def test_dynamic_true_avoids_recompiles():
    variants = [torch.randn(8, 16), torch.randn(16, 16)]
    result = compile_ab(_tiny_mlp(), torch.randn(4, 16), backend="eager", dynamic=True,
                        shape_variants=variants, **FAST)
    assert result.recompile_count == 0 and result.graph_break_count == 0


def test_train_mode_runs_backward():
    model = Branchy()
    result = compile_ab(model, torch.randn(4, 8), backend="aot_eager", train=True, **FAST)
    assert result.graph_break_count == 1
    assert model.a.weight.grad is not None
    assert any("no code generation" in w for w in result.warnings)


@pytest.mark.slow  # ~6 s with a warm inductor cache, ~13 s cold (C++ build on 2 cores)
def test_inductor_on_cpu_small_model():
    result = compile_ab(_tiny_mlp(), torch.randn(64, 16), backend="inductor", steps=30, warmup=2)
    assert isinstance(result, CompileABResult)
    assert result.graph_break_count == 0 and result.recompile_count == 0
    # a loaded machine's drifting timing is stated as such (ABResult.conclusion), never a verdict
    assert result.verdict in VERDICTS or (result.timing.unreliable and result.verdict == result.timing.conclusion)
    assert result.compiled_first_call_s > result.timing.median_b
    assert result.compile_time_s > 0.05  # inductor generates and builds C++ on the first call
    if result.verdict == "faster":
        assert math.isfinite(result.break_even_steps)
    else:
        assert result.break_even_steps == math.inf
    # which speed finding appears follows from the timing the run saw (a loaded machine makes it
    # inconclusive), never from the machine's speed: the test checks the rule, not the outcome
    titles = [f.title for f in result.findings]
    if result.timing.unreliable:
        assert any("inconclusive" in t and "re-run on a quiet machine" in t for t in titles)
        assert not any("no steady-state speedup" in t for t in titles)
    elif result.verdict != "faster":
        assert any("no steady-state speedup" in t for t in titles)
    summary = result.summary()
    assert summary["backend"] == "inductor" and summary["graph_breaks"] == 0
    assert "torch.compile A/B (inductor)" in result._repr_html_()
    assert repr(result).startswith("CompileABResult(inductor:")


def _fake_timing(eager_s, compiled_s):
    world = {"now": 0.0, "i": 0}

    def work(seconds):
        def fn():
            world["i"] += 1
            world["now"] += seconds * (1 + 0.01 * (world["i"] % 5))
        return fn

    return compare(work(eager_s), work(compiled_s), repeats=30, warmup=1, clock=lambda: world["now"],
                   device="cpu", labels=("eager", "compiled"))


def test_break_even_is_compile_time_over_saving():
    timing = _fake_timing(0.010, 0.006)
    result = CompileABResult(timing, 0.02, 2.0 + timing.median_b, (), (), planned_steps=100)
    assert result.verdict == "faster"
    assert result.compile_time_s == pytest.approx(2.0)
    saving = timing.median_a - timing.median_b
    assert result.break_even_steps == math.ceil(2.0 / saving)
    from perfkit.bench.compile_ab_result import with_findings

    findings = with_findings(result).findings
    assert any("pays off only after" in f.title for f in findings)
    assert not any("pays off" in f.title for f in with_findings(
        CompileABResult(timing, 0.02, 2.0, (), (), planned_steps=10**6)).findings)


def test_no_saving_means_infinite_break_even():
    result = CompileABResult(_fake_timing(0.010, 0.012), 0.02, 3.0, (), ())
    assert result.verdict == "slower" and result.break_even_steps == math.inf


def test_frame_lists_breaks_and_recompiles():
    result = CompileABResult(_fake_timing(0.01, 0.01), 0.0, 0.0,
                             (GraphBreak("Data-dependent branching", "m.py:3", "if x:", "hint"),),
                             (Recompile("0/1", "forward (m.py:1)", "size mismatch"),))
    frame = result.to_frame()
    assert frame.to_dict("records") == [
        {"kind": "graph_break", "reason": "Data-dependent branching", "location": "m.py:3", "detail": "hint"},
        {"kind": "recompile", "reason": "size mismatch", "location": "forward (m.py:1)", "detail": "0/1"}]


@pytest.mark.parametrize("kwargs, match", [({"backend": "nope"}, "backend"), ({"mode": "fast"}, "mode"),
                                           ({"planned_steps": 0}, "planned_steps"),
                                           ({"device": "tpu"}, "device"), ({"steps": 0}, "steps"),
                                           ({"confidence": 0.2}, "confidence"), ({"warmup": -1}, "warmup")])
def test_bad_arguments_raise_before_compiling(kwargs, match, monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda *a, **k: pytest.fail("compiled despite a bad argument"))
    with pytest.raises(ParameterError, match=match):
        compile_ab(_tiny_mlp(), torch.randn(2, 16), **kwargs)


def test_model_must_be_a_module():
    with pytest.raises(ParameterError, match="nn.Module"):
        compile_ab(lambda x: x, torch.randn(2, 16), backend="eager")


class Flagged(torch.nn.Module):
    """A Python flag argument read in forward (a recompile when it flips) and a bare
    ``if tensor.any():`` (a graph break whose dynamo explanation names no line)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x, flag=False):
        h = self.a(x)
        if flag:  # planted recompile
            h = h * 2
        if h.any():  # planted graph break
            h = h.relu()
        return h


def _line(marker: str) -> int:
    lines, first = inspect.getsourcelines(Flagged.forward)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def test_flag_recompile_and_bare_any_branch_each_have_reason_and_line():
    x = torch.randn(4, 8)
    result = compile_ab(Flagged(), (x, False), backend="eager", shape_variants=[(x, True)], **FAST)
    brk = result.graph_breaks[0]
    assert brk.reason == "Data-dependent branching" and brk.location == f"{__file__}:{_line('planted graph break')}"
    assert "torch.cond" in brk.detail
    flag = [r for r in result.recompiles if r.location.endswith(f":{_line('planted recompile')}")]
    assert flag and flag[0].reason == "flag == False" and flag[0].code.startswith("if flag:")
    assert not flag[0].on_shape and flag[0].location == f"{__file__}:{_line('planted recompile')}"
    finding = next(f for f in result.findings if "recompile" in f.title)
    assert "flag == False at " in finding.title and "Keep such values fixed" in finding.fix
    assert "mark_dynamic" not in finding.fix  # a flag is not a shape: no shape advice


def test_guard_failure_text_is_split_into_guard_line_code_and_hint():
    from perfkit.bench.dynamo_watch import _recompile

    text = (" self.scale == 1        # return h * self.scale  # wt/m.py:10 in forward (HINT: make it a tensor.)\n"
            "User stack trace:\n  File \"/abs/m.py\", line 9, in forward\n    y = helper(h)\n"
            "  File \"/abs/helper.py\", line 10, in helper\n    return h * self.scale")
    r = _recompile("0/1", "forward (/abs/m.py:3)", text)
    assert (r.reason, r.location, r.code, r.hint) == ("self.scale == 1", "/abs/helper.py:10",
                                                      "return h * self.scale", "make it a tensor.")
    # torch's own frame after the user's (issue 23: external_utils.py:67) does not replace the user's line
    wrapped = _recompile("0/1", "forward (/abs/m.py:3)", text + "\n  File \"/venv/lib/python3.11/site-packages/torch/"
                         "_dynamo/external_utils.py\", line 67, in inner\n    return fn(*args, **kwargs)")
    assert (wrapped.location, wrapped.code) == ("/abs/helper.py:10", "return h * self.scale")
    shape = _recompile("0/1", "forward (/abs/m.py:3)", " tensor 'x' size mismatch at index 0. expected 4, actual 8")
    assert shape.on_shape and shape.location == "" and shape.reason.startswith("tensor 'x' size mismatch")
    result = CompileABResult(_fake_timing(0.01, 0.01), 0.0, 0.0, (), (shape, r))
    assert result.to_frame()["location"].tolist() == ["forward (/abs/m.py:3)", "/abs/helper.py:10"]
    from perfkit.bench.compile_ab_result import with_findings

    fix = next(f for f in with_findings(result).findings if "recompile" in f.title).fix
    assert "mark_dynamic" in fix and "Keep such values fixed" in fix and "dynamo: make it a tensor." in fix


def test_a_recompile_in_torchs_wrapper_names_the_users_model():
    """Issue 23: a shape recompile's frame was torch/_dynamo/external_utils.py:67 (inner)."""
    import torch

    from perfkit.bench.dynamo_watch import user_code

    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2

    def step(x):
        return x + 1

    assert user_code(Net()) == f"forward ({__file__}:{Net.forward.__code__.co_firstlineno})"
    assert user_code(step).startswith("step (") and "/torch/" not in user_code(step)
    assert user_code(torch.nn.Sequential(torch.nn.Linear(2, 2))) == "Sequential.forward"
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4))
    result = compile_ab(seq, (torch.randn(8, 4),), shape_variants=[torch.randn(16, 4)], backend="eager",
                        device="cpu", steps=3, warmup=1, min_time_s=0.001)
    assert result.recompiles and all("/torch/" not in (r.location or r.function) for r in result.recompiles)


def _speed_fix(result) -> str:
    from perfkit.bench.compile_ab_result import with_findings

    return next(f for f in with_findings(result).findings if "speedup" in f.title).fix


def test_no_speedup_advice_mentions_graph_breaks_only_when_there_are_some():
    slower = _fake_timing(0.010, 0.012)
    assert "graph break(s) above first" not in _speed_fix(CompileABResult(slower, 0.02, 3.0, (), ()))
    assert _speed_fix(CompileABResult(slower, 0.02, 3.0, (), ())).startswith("No graph break split the model")
    broken = (GraphBreak("Data-dependent branching", "m.py:3", "if x:", "hint"),)
    assert _speed_fix(CompileABResult(slower, 0.02, 3.0, broken, ())).startswith("Fix the 1 graph break(s) above first")
