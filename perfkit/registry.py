"""The investigation notebooks perfkit ships, and how a notebook file is read.

A notebook is a jupytext percent-format Python file, ``notebooks/<name>.py`` (cells start with
``# %%``; the parameters cell is ``# %% tags=["parameters"]``). To add one: drop the file in
``notebooks/`` and add its name to ``INVESTIGATIONS`` below (the order ``perfkit run`` runs them
in). A plain ``.ipynb`` works too (``perfkit init`` writes those for JupyterLab); where a folder
holds both, the ``.ipynb`` wins, since that is the copy JupyterLab edits.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import MissingDependencyError, ParameterError

# name -> one line on what it answers. `perfkit run` without names runs these, in this order.
INVESTIGATIONS = {
    "cpu_bound": "What limits the step: GPU (compute or communication), input, syncs, launching, host compute, "
                 "compiling or warm-up (a CPU-only trace: host time only)?",
    "step_anatomy": "Where does each millisecond of the step go: which Python, what bounds it, why the GPU idles?",
    "gpu_kernels": "What does the GPU do with its time: which kernels, Tensor Cores or not, FLOP/s against the "
                   "device's peak?",
    "htod": "Which host-to-device copies does a step make, and how fast can they be?",
    "sync_points": "Where does the host wait for the GPU, and for how long?",
    "ranks": "Which rank is the straggler, why, and how long do the others wait for it?",
    "compile_ab": "Is torch.compile worth it for this model?",
    "amp_regression": "Is mixed precision faster, and still correct?",
    "memory_leak": "Does memory grow from step to step (a live run, CUDA memory snapshots or two traces)?",
    "validation": "Does perfkit report what this machine does?",
}
# Worked case studies: each walks one classic investigation from symptom to proven fix. They run
# as the set "case_studies" (`perfkit run case_studies`), not in a plain `perfkit run`.
CASE_STUDIES = {
    "case_mpc_planner": "An MPC planner is CPU-bound: per-sample tensor construction, recompiles, planning memory",
    "case_world_model": "A world-model agent's replay sampling: copies, the train/sample range, preallocation",
    "case_nan_checks": "A navigation agent's NaN checks: nonzero syncs, one-argument torch.where, memory growth",
    "case_steps_per_second": "50 -> 29,000 steps/s: .item() logging, fused Adam, GradScaler, AMP, torch.compile",
    "case_environment": "An optimization guide's environment report: hardware defaults, op suite, system monitor",
}
# A name `perfkit run` expands into several notebooks.
NOTEBOOK_SETS = {"case_studies": tuple(CASE_STUDIES)}
NOTEBOOK_SUFFIXES = (".ipynb", ".py")


def notebook_names() -> tuple[str, ...]:
    """The registered investigations, in run order."""
    return tuple(INVESTIGATIONS)


def shipped_notebooks() -> tuple[str, ...]:
    """Every notebook perfkit ships: the investigations, then the case studies."""
    return (*INVESTIGATIONS, *CASE_STUDIES)


def expand_sets(names) -> list[str]:
    """``names`` with each set name of ``NOTEBOOK_SETS`` replaced by its notebooks, in order,
    each notebook once."""
    return list(dict.fromkeys(m for n in names for m in NOTEBOOK_SETS.get(str(n), (n,))))


def read_notebook(path: str | os.PathLike):
    """The notebook at ``path`` as an nbformat v4 node: ``.py`` files through jupytext (percent
    format), ``.ipynb`` through nbformat. Raises ParameterError for another suffix or a file that
    does not parse."""
    path = Path(path)
    if path.suffix not in NOTEBOOK_SUFFIXES:
        raise ParameterError(f"{path}: a notebook is a .py (jupytext percent format) or .ipynb file")
    try:
        if path.suffix == ".py":
            nb = _jupytext().read(str(path), fmt="py:percent")
        else:
            import nbformat

            nb = nbformat.read(str(path), as_version=4)
    except (OSError, ValueError, SyntaxError) as exc:
        raise ParameterError(f"{path}: not a readable notebook ({type(exc).__name__}: {exc})") from None
    for cell in nb.cells:  # papermill reads every cell's tags
        cell.metadata.setdefault("tags", [])
    return nb


def write_ipynb_text(nb) -> str:
    """``nb`` as .ipynb JSON text (nbformat v4), outputs as they are."""
    import nbformat

    return nbformat.writes(nb) + "\n"


def _jupytext():
    try:
        import jupytext
    except ImportError:
        raise MissingDependencyError("jupytext", "reading percent-format notebooks (notebooks/*.py)") from None
    return jupytext
