"""The forward-pass and nonzero scan rules: ``check-in-forward``, ``where-nonzero``, ``nonzero-in-step`` and
``bool-mask-index``."""
import textwrap
from pathlib import Path

import pytest

from perfkit.detect.patterns import forward_functions
from perfkit.detect.static import scan

FIXTURES = Path(__file__).parent / "fixtures"
BEFORE = ("scan_labeled.py", "scan_labeled_heldout.py", "scan_labeled_rl.py")  # labeled before these rules
NEW_RULES = {"check-in-forward", "where-nonzero"}
SHAPE_RULES = {"nonzero-in-step", "bool-mask-index"}


def findings(tmp_path, code: str) -> set[tuple[int, str]]:
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(code).lstrip("\n"))
    return {(f.line, f.rule) for f in scan(path).findings}


def test_new_rules_add_no_flag_to_the_fixtures_labeled_before_them():
    hits = [f for f in scan([FIXTURES / name for name in BEFORE]).findings if f.rule in NEW_RULES]
    assert hits == []


def test_nan_checks_in_forward_replace_the_generic_condition_finding(tmp_path):
    code = """
        import torch
        class M(torch.nn.Module):
            def forward(self, x):
                if torch.isnan(x).any():
                    x = x.nan_to_num()
                if (x > 1).any():
                    x = x.clamp(max=1)
                if not x.isfinite().all().item():
                    x = x.nan_to_num()
                flag = bool(x.isinf().any())
                return x, torch.isnan(x).any()
        def train(x):
            if torch.isnan(x).any():
                return None
    """
    assert findings(tmp_path, code) == {
        (4, "check-in-forward"), (6, "tensor-condition"), (8, "check-in-forward"), (10, "check-in-forward"),
        (13, "tensor-condition")}


def test_checks_in_helpers_that_forward_calls_count_one_level_deep(tmp_path):
    code = """
        import torch
        def check_nan(x, site):
            if torch.isnan(x).any():
                raise ValueError(site)
        def deeper(x):
            if torch.isnan(x).any():
                raise ValueError
        def unrelated(x):
            if torch.isnan(x).any():
                raise ValueError
        class M(torch.nn.Module):
            def _finite(self, x):
                assert torch.isfinite(x).all()
                deeper(x)
            def forward(self, x):
                check_nan(x, "in")
                self._finite(x)
                return x.any()
    """
    assert findings(tmp_path, code) == {(3, "check-in-forward"), (6, "tensor-condition"), (9, "tensor-condition"),
                                        (13, "check-in-forward")}
    tree = __import__("ast").parse(textwrap.dedent(code))
    assert forward_functions(tree) == {"forward", "check_nan", "_finite"}  # not x.any()'s "any"


def test_numpy_math_and_device_side_checks_are_not_flagged(tmp_path):
    code = """
        import math
        import numpy as np
        import torch
        class M(torch.nn.Module):
            def forward(self, x, arr):
                if np.isnan(arr).any():
                    arr = np.nan_to_num(arr)
                if math.isnan(float(arr.sum())):
                    pass
                ok = torch.isfinite(x).all()
                torch._assert_async(ok)
                return torch.nan_to_num(x), ok
    """
    assert findings(tmp_path, code) == set()


def test_one_argument_where_is_flagged_everywhere_three_argument_never(tmp_path):
    code = """
        import numpy as np
        import torch
        from torch import where
        def f(mask, a, b, args):
            i = torch.where(mask)[0]
            r, c = where(mask)
            j = torch.where(condition=mask)
            k = torch.where(mask, a, b)
            m = torch.where(*args)
            n = np.where(mask)
            return i, r, c, j, k, m, n
    """
    assert findings(tmp_path, code) == {(5, "where-nonzero"), (6, "where-nonzero"), (7, "where-nonzero")}


def test_the_ppo_workloads_nan_check_helper_is_found_in_its_source():
    from perfkit.workloads import ppo

    hits = {f.rule: f for f in scan(ppo.__file__).findings}
    line = Path(ppo.__file__).read_text().splitlines()[hits["check-in-forward"].line - 1]
    assert "torch.isnan(x).any()" in line
    assert hits["check-in-forward"].severity == "high" and "every N steps" in hits["check-in-forward"].fix


@pytest.mark.parametrize("ignore, expected", [("# perfkit: ignore[check-in-forward]", set()),
                                              ("# perfkit: ignore[tensor-condition]", {(3, "check-in-forward")})])
def test_ignore_comments_name_the_new_rule(tmp_path, ignore, expected):
    code = f"""
        import torch
        def forward(x):
            if torch.isnan(x).any():  {ignore}
                pass
    """
    assert findings(tmp_path, code) == expected


def test_shape_rules_add_no_flag_to_the_fixtures_labeled_before_them():
    hits = [f for f in scan([FIXTURES / name for name in (*BEFORE, "scan_labeled_forward.py")]).findings
            if f.rule in SHAPE_RULES]
    assert hits == []


def test_nonzero_and_mask_indexing_in_forward_and_loops(tmp_path):
    code = """
        import torch
        class M(torch.nn.Module):
            def forward(self, x, idx, mask):
                a = x[x > 0]
                m = torch.isfinite(x) & (x != 0)
                b = x[:, m]
                c = x.nonzero(as_tuple=True)
                d = torch.masked_select(x, m)
                e = x[idx] + x[:, 0] + x[mask] + x[x.argmax()]
                return a, b, c, d, e
        def train(xs, fill):
            for x in xs:
                keep = x.gt(0.5).logical_not()
                y = x[keep]
                x[keep] = 0.0
                x[keep] = fill
                x[keep] += 1
                x[keep] = torch.zeros(3)
                keep = torch.arange(3)
                z = x[keep]
            return y, z
        def once(x):
            m = x > 0
            return x[m], x.nonzero(), torch.nonzero(x)
    """
    assert findings(tmp_path, code) == {
        (4, "bool-mask-index"), (6, "bool-mask-index"), (7, "nonzero-in-step"), (8, "nonzero-in-step"),
        (14, "bool-mask-index"), (17, "bool-mask-index"), (18, "bool-mask-index")}


def test_host_data_and_files_without_torch_are_not_flagged(tmp_path):
    numpy_only = """
        import numpy as np
        def f(frames):
            for arr in frames:
                a = arr[arr > 0]
                b = arr.nonzero()
                c = np.nonzero(arr)
            return a, b, c
    """
    assert findings(tmp_path, numpy_only) == set()
    mixed = """
        import numpy as np
        import torch
        def f(frames, t):
            for raw in frames:
                arr = np.asarray(raw)
                a = arr[arr > 0]
                b = arr.nonzero()
                n = len(raw)
                c = t[n > 3]
                d = t[t > n]
            return a, b, c, d
    """
    assert findings(tmp_path, mixed) == {(10, "bool-mask-index")}  # t may be a tensor; n > 3 is a Python bool


@pytest.mark.parametrize("ignore, expected", [("# perfkit: ignore[bool-mask-index]", {(4, "nonzero-in-step")}),
                                              ("# perfkit: ignore[nonzero-in-step]", {(3, "bool-mask-index"), (4, "nonzero-in-step")})])
def test_ignore_comments_name_the_shape_rules(tmp_path, ignore, expected):
    code = f"""
        import torch
        def forward(x):
            y = x[x > 0]  {ignore}
            return y.nonzero()
    """
    assert findings(tmp_path, code) == expected
