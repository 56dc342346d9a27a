"""Name matching on event-name columns, computed once per category of a categorical column (a
trace's names repeat: 2 million events hold a few thousand distinct names)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def starts_with(names: pd.Series, prefix: str) -> np.ndarray:
    """Boolean array: which names start with ``prefix`` (computed once per category)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = names.cat.categories.astype(str).str.startswith(prefix)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, np.asarray(hits)[np.clip(codes, 0, None)], False)
    return names.astype(str).str.startswith(prefix).to_numpy(dtype=bool)


def contains(names: pd.Series, part: str) -> np.ndarray:
    """Boolean array: which names contain ``part`` (computed once per category)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = names.cat.categories.astype(str).str.contains(part, regex=False)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, np.asarray(hits)[np.clip(codes, 0, None)], False)
    return names.astype(str).str.contains(part, regex=False).to_numpy(dtype=bool)
