"""Name matching on event-name columns, computed once per category of a categorical column (a
trace's names repeat: 2 million events hold a few thousand distinct names)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def as_text(column: pd.Series) -> pd.Series:
    """``column.astype(str)``; for a categorical without missing values, its categories made text
    and taken by code (a string per category, not one per row)."""
    if not isinstance(column.dtype, pd.CategoricalDtype) or (column.cat.codes.to_numpy() < 0).any():
        return column.astype(str)
    strings = column.cat.categories.astype(str).take(column.cat.codes.to_numpy())
    return pd.Series(strings, index=column.index, name=column.name)


def is_in(column: pd.Series, values) -> np.ndarray:
    """Boolean array: ``column.isin(values)``; for a categorical, by comparing codes with the code of
    each wanted category (an int8 compare per category, not a hash per row)."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.isin(values).to_numpy()
    codes, out = column.cat.codes.to_numpy(), np.zeros(len(column), dtype=bool)
    for code in np.flatnonzero(column.cat.categories.isin(values)).tolist():
        out |= codes == code
    return out


def starts_with(names: pd.Series, prefix: str | tuple[str, ...]) -> np.ndarray:
    """Boolean array: which names start with ``prefix`` (or one of several; computed once per category)."""
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
