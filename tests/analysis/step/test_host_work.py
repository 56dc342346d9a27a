"""What the host computes most and the fix each kind gets (``perfkit.analysis.step.host_work``)."""
import pandas as pd
import pytest

from perfkit.analysis.step.host_work import host_compute_fix, top_host_work

O = {"wall_us": 1_100.0, "warmup_us": 100.0, "python_us": 200.0, "untraced_us": 300.0}
E = {"launches_per_step": 12}


@pytest.mark.parametrize("op_us, kind, share", [(299.0, "untraced", 0.3), (301.0, "op", 0.301)])
def test_the_largest_of_op_python_and_untraced_leads(op_us, kind, share):
    top = top_host_work({"host_ops": pd.DataFrame({"name": ["aten::copy_"], "total_us": [op_us]})}, O)
    assert top["kind"] == kind and top["share"] == pytest.approx(share)  # the share leaves warm-up out


def test_python_leads_when_it_holds_the_most_and_no_op_was_recorded():
    top = top_host_work({}, dict(O, python_us=301.0))
    assert (top["kind"], top["what"], top["us"]) == ("python", "Python with no op under it", 301.0)


@pytest.mark.parametrize("name, says", [("aten::randn", "device='cuda'"), ("aten::empty", "expandable_segments"),
                                        ("aten::index", "Move aten::index to the GPU")])
def test_each_op_kind_gets_its_own_fix(name, says):
    fix = host_compute_fix({"kind": "op", "name": name}, E, stacks=True)
    assert says in fix and "12 launches per step" in fix


@pytest.mark.parametrize("stacks, says, never", [(True, "py-spy", "with_stack=True"), (False, "with_stack=True", "py-spy")])
def test_untraced_time_asks_for_stacks_only_when_the_trace_has_none(stacks, says, never):
    fix = host_compute_fix({"kind": "untraced", "name": "untraced host code"}, E, stacks)
    assert says in fix and never not in fix


def test_python_time_points_at_hotspots():
    assert "perfkit hotspots" in host_compute_fix({"kind": "python", "name": "Python"}, E, stacks=True)
