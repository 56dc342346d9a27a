"""The equivalent mutants of ``benchmarks/mutation.py``: mutations no input can tell apart from the original,
each with why. The driver leaves them out of a module's score and prints them after the table."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Equivalent:
    """A mutant no input can tell apart from the original: ``module``'s function ``function``
    (as mutmut names it: ``x_decide``, ``xǁClassǁmethod``) with the text ``before`` (the changed line, stripped,
    or the part of it that changed) turned into ``after``, and why."""
    module: str
    function: str
    before: str
    after: str
    why: str


def _same(module: str, function: str, before: str, afters: tuple, why: str) -> list[Equivalent]:
    """One entry per mutation of ``before`` into each of ``afters``, for one reason."""
    return [Equivalent(module, function, before, after, why) for after in afters]


NAN_SPELLING = 'float("nan") and float("NAN") are the same number: float() reads the name in any case'
RULES = "perfkit/analysis/step/rules.py"
EQUIVALENT: list[Equivalent] = [
    Equivalent(RULES, "x__evidence", 'whole = row["wall_us"] if row["wall_us"] > 0 else float("nan")',
               'whole = row["wall_us"] if row["wall_us"] > 0 else float("NAN")', NAN_SPELLING),
    Equivalent(RULES, "x__evidence", 'wall = whole - warm if whole - warm > 0 else float("nan")',
               'wall = whole - warm if whole - warm > 0 else float("NAN")', NAN_SPELLING),
    Equivalent(RULES, "x__evidence",
               '"median_kernel_us": row.get("median_kernel_us", float("nan")), "tiny_kernel_pct": row["tiny_kernel_pct"],',
               '"median_kernel_us": row.get("median_kernel_us", float("NAN")), "tiny_kernel_pct": row["tiny_kernel_pct"],',
               NAN_SPELLING),
    Equivalent(RULES, "x__evidence", 'steps = row.get("steps", 1) or 1', 'steps = row.get("steps", None) or 1',
               'a missing step count is 1 either way: None or 1 is 1'),
    Equivalent(RULES, "x__evidence", 'steps = row.get("steps", 1) or 1', 'steps = row.get("steps", ) or 1',
               'a missing step count is 1 either way: get() without a default gives None, and None or 1 is 1'),
    Equivalent(RULES, "x_no_fix_verdict",
               'if untraced > max(parts.values()) and max(host, e["comm_exposed_share"]) < SECOND_CAUSE_SHARE:',
               'if untraced >= max(parts.values()) and max(host, e["comm_exposed_share"]) < SECOND_CAUSE_SHARE:',
               'at a tie the host part takes the largest value, and max() keeps the first of equal parts: '
               'host-compute-bound is last, so the verdict and its share are the same'),
]


WARMUP = "perfkit/analysis/step/warmup.py"
SORT_KIND = 'a sort on several columns is a lexsort, stable whatever kind says'
SORTED_GROUPS = 'the frame is already in the order of its groups: sorting them, or not, numbers them the same'
STABLE = 'numpy reads a sort kind by its first letter, in any case: "STABLE" is "stable"'
SAME_INPUT = ('the callers pass the trace\'s own host events and launches, the same tables computed again here '
              '(warmup_events passes its own arguments on)')
DROPPED_INDEX = 'the index column reset_index adds is dropped by the [COLUMNS] selection, or reset after'
SCHEMA_DTYPE = 'the column already has this dtype (trace/schema: step and parent int64, ts_us and dur_us float64)'
EQUIVALENT += [
    *_same(WARMUP, "x__by_name", 'kind="stable"', ('kind=None', 'kind="XXstableXX"', 'kind="STABLE"'), SORT_KIND),
    Equivalent(WARMUP, "x__by_name", ', kind="stable")', ', )', SORT_KIND),
    *_same(WARMUP, "x__by_name", ', sort=False)', (', sort=None)', ', sort=True)', ', )'), SORTED_GROUPS),
    *_same(WARMUP, "x__by_name", 'dtype.kind != "i"', ('dtype.kind == "i"', 'dtype.kind != "XXiXX"',
                                                       'dtype.kind != "I"'),
           'both branches group the same (rank, name) in the same order: the integer one is the fast path'),
    *_same(WARMUP, "x__by_name", ', dtype=bool)', (', dtype=None)', ', )'),
           'group numbers summed as floats name the same groups as integers'),
    *_same(WARMUP, "x__inside_another", 'depth = 0', ('depth = 1',), 'the depth guard only stops a cycle of '
           'parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'and depth < 10_000', ('or depth < 10_000', 'and depth <= 10_000',
                                                               'and depth < 10001'),
           'the depth guard only stops a cycle of parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'depth += 1', ('depth = 1', 'depth -= 1', 'depth += 2'),
           'the depth guard only stops a cycle of parents, which parents found by time nesting never form'),
    *_same(WARMUP, "x__inside_another", 'if parent in parents.index else -1',
           ('if (parent in parents.index) or True else -1', 'if parent in parents.index else +1',
            'if parent in parents.index else -2'),
           'inside the loop a parent (>= 0) is a label of the events table, always in its index'),
    *_same(WARMUP, "x__text_order_codes", 'kind="stable")', ('kind=None)', 'kind="STABLE")'),
           'the names argsort orders are distinct (factorize\'s uniques): no ties for stability to keep'),
    Equivalent(WARMUP, "x__text_order_codes", ', kind="stable")', ', )',
               'the names argsort orders are distinct (factorize\'s uniques): no ties for stability to keep'),
    *_same(WARMUP, "x_cold_first_steps", 'sort=False', ('sort=None',), 'pandas reads sort=None as False'),
    *_same(WARMUP, "x_cold_first_steps", '< 1 + MIN_LATER_STEPS', ('< 1 - MIN_LATER_STEPS',),
           'a rank with one full step has no later median (NaN: no row); with two, the second is a stub beside a '
           'first 10x longer (trace.steps.stub_steps), so the rank has one full step'),
    *_same(WARMUP, "x_warmup_calls", 'host_events(trace, categories)', ('host_events(trace, )',),
           'the default categories hold these, and the `mine` mask keeps only these'),
    *_same(WARMUP, "x_warmup_calls", 'if host is None', ('if (host is None) or True',), SAME_INPUT),
    *_same(WARMUP, "x_warmup_calls", 'if links is None', ('if (links is None) or True',), SAME_INPUT),
    *_same(WARMUP, "x_warmup_events", 'host=host, links=links', ('host=None, links=links', 'links=links',
                                                                 'host=host, links=None', 'host=host, '),
           SAME_INPUT),
    *_same(WARMUP, "x_warmup_calls", '.fillna(np.inf)', ('.fillna(None)',),
           'a NaN median (no later call) fails `dur >= max(10 * NaN, 1000)` as an infinite one does'),
    *_same(WARMUP, "x_warmup_calls", 'fillna(0)', ('fillna(None)', 'fillna(1)'),
           'NaN and 1 later calls are under MIN_LATER as 0 is'),
    *_same(WARMUP, "x_warmup_calls", '(count - 1 >= MIN_LATER)', ('(count + 1 >= MIN_LATER)',),
           'a launch\'s later calls (count - 1, its `size`) are held to MIN_LATER again in `hit`'),
    *_same(WARMUP, "x_warmup_calls", '.reset_index(drop=True)', ('.reset_index(drop=None)',
                                                                 '.reset_index(drop=False)'), DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_calls", 'kind="stable"', ('kind="STABLE"',), STABLE),
    *_same(WARMUP, "x_warmup_calls", 'dtype=np.int64)', ('dtype=None)',), SCHEMA_DTYPE),
    *_same(WARMUP, "x_warmup_calls", 'dtype=np.float64)', ('dtype=None)',), SCHEMA_DTYPE),
    *_same(WARMUP, "x_warmup_calls", 'fill_value=-1)', ('fill_value=None)', 'fill_value=-2)', ')'),
           'a call that launched nothing is then NaN or -2, and `kernel >= 0` is False for both, as for -1'),
    *_same(WARMUP, "x_warmup_calls", '"group", sort=False)', ('"group", sort=None)', '"group", sort=True)',
                                                              '"group", )'), SORTED_GROUPS),
    *_same(WARMUP, "x_warmup_events", 'ignore_index=True)', ('ignore_index=None)', 'ignore_index=False)', ')'),
           DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_events", '.reset_index(drop=True)', ('.reset_index(drop=None)',
                                                                  '.reset_index(drop=False)'), DROPPED_INDEX),
    *_same(WARMUP, "x_warmup_events", 'kind="stable"', ('kind="STABLE"',), STABLE),
]


WHATIF = "perfkit/analysis/step/whatif.py"
EQUIVALENT += [
    *_same(WHATIF, "x_whatif", '"whatif"', ('None', '"XXwhatifXX"', '"WHATIF"'),
           'the name only keys the trace\'s cache of derived results, and no other module asks for it'),
    Equivalent(WHATIF, "x__whatif", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    Equivalent(WHATIF, "x__whatif", 'changed[name] = graphs', 'changed[name] = None',
               'only the keys of `changed` are read (_combined applies the fixes again by name)'),
    Equivalent(WHATIF, "xǁWhatIfResultǁto_json", 'if len(self.replay.steps)', 'if (len(self.replay.steps)) or True',
               'the mean of no steps is NaN, which jsonable writes as null, as None'),
    Equivalent(WHATIF, "xǁWhatIfResultǁprediction_json",
               'if self.lead is not None and self.lead.measure', 'if (self.lead is not None and self.lead.measure) or True',
               'where the lead is not the measure it is the top fix (the first deciding fix that applies), and where '
               'there is no lead the top fix, ranked after it, saves under MIN_SAVING too: None'),
    *_same(WHATIF, "xǁWhatIfResultǁstep_verdicts", '.get(lead.fix, 0.0)', ('.get(lead.fix, None)', '.get(lead.fix, )',
                                                                          '.get(lead.fix, 1.0)'),
           'the lead is one of the ranked fixes: the default is never read'),
    Equivalent(WHATIF, "xǁWhatIfResultǁstep_verdicts", 'if lead else 0.0', 'if lead else 1.0',
               'without a lead the verdict is "" whatever lead_share holds (`lead is not None and ...`)'),
]

SYNC_RESULT = "perfkit/analysis/sync_points/result.py"
RECORDS = 'pandas reads to_dict\'s orient in any case: "RECORDS" is "records"'
EQUIVALENT += [
    *(Equivalent(SYNC_RESULT, f, 'to_dict("records")', 'to_dict("RECORDS")', RECORDS)
      for f in ("x_sync_findings", "xǁSyncResultǁto_json")),
]


FIND = "perfkit/analysis/sync_points/find.py"
CACHE_KEY = "the name only keys the trace's cache of derived results, and no other module asks for it"
NOT_COMPARED = 'a runtime candidate\'s source is compared only with "op" and "copy": any other value, or none, is the same'
EQUIVALENT += [
    *_same(FIND, "x_syncs", '"syncs"', ('None', '"XXsyncsXX"', '"SYNCS"'), CACHE_KEY),
    *_same(FIND, "x_blocking_calls", '"blocking_calls"', ('None', '"XXblocking_callsXX"', '"BLOCKING_CALLS"'),
           CACHE_KEY),
    *_same(FIND, "x__candidates", '"source": "runtime"', ('"XXsourceXX": "runtime"', '"SOURCE": "runtime"',
                                                          '"source": "XXruntimeXX"', '"source": "RUNTIME"'), NOT_COMPARED),
    Equivalent(FIND, "x__episodes", 'kind="stable"', 'kind="STABLE"', STABLE),
    *_same(FIND, "x__episodes", 'dtype=np.int64)', ('dtype=None)',), SCHEMA_DTYPE),
    *_same(FIND, "x__episodes", 'reindex(ev.index, fill_value=0)', ('reindex(ev.index, fill_value=None)',
                                                                   'reindex(ev.index, )'),
           'an entry with no wait under it is then NaN, and NaN > 0 is False as 0 > 0 is'),
    *_same(FIND, "x_in_windows", '.astype(np.int64)', ('.astype(None)',),
           'a float key (0.0, 1.0) hashes and compares equal to the int key (0, 1) looked up'),
    Equivalent(FIND, "x_in_windows", 'count=len(events))', ')',
               'count only sizes the array ahead: the generator yields len(events) values either way'),
    *_same(FIND, "x__name_of", 'np.asarray(positions, dtype=np.int64)', ('np.asarray(positions, dtype=None)',
                                                                          'np.asarray(positions, )'),
           'the positions come from Ancestors.walk and positions(), already int64 arrays'),
    Equivalent(FIND, "x__warnings", 'if len(host_waits) else 0', 'if (len(host_waits)) or True else 0',
               'the sum of an empty column is 0'),
    Equivalent(FIND, "x__warnings", 'if len(gpu_side) else gpu_side', 'if (len(gpu_side)) or True else gpu_side',
               'an empty gpu_side has its columns (_gpu_side), and filtering it gives it back empty'),
]


FLOPS = "perfkit/analysis/gpu_kernels/flops.py"
EQUIVALENT += [
    *_same(FLOPS, "x_conv", 'min(spatial, default=1)', ('min(spatial, default=None)', 'min(spatial, )',
                                                         'min(spatial, default=2)'),
           'an input of three or more dimensions has at least one spatial one: min() never needs its default'),
]


STEPS = "perfkit/trace/steps.py"
BY_RANK = "each rank's rows are handled on their own: the order the ranks come in changes nothing"
EQUIVALENT += [
    *_same(STEPS, "x_step_windows", '"step_windows"', ('None', '"XXstep_windowsXX"', '"STEP_WINDOWS"'), CACHE_KEY),
    *_same(STEPS, "x_before_window_events", '"before_window_events"',
           ('None', '"XXbefore_window_eventsXX"', '"BEFORE_WINDOW_EVENTS"'), CACHE_KEY),
    *_same(STEPS, "x_stub_steps", '"rank", sort=False)', ('"rank", sort=None)', '"rank", sort=True)', '"rank", )'),
           BY_RANK),
    *_same(STEPS, "x_window_index", '"rank", sort=False)', ('"rank", sort=None)', '"rank", sort=True)', '"rank", )'),
           BY_RANK),
    Equivalent(STEPS, "x__table", 'kind="stable"', 'kind="STABLE"', STABLE),
    Equivalent(STEPS, "x_window_index", 'kind="stable"', 'kind="STABLE"', STABLE),
]


STRAGGLERS = "perfkit/analysis/ranks/stragglers.py"
SORT_NONE = "pandas reads sort=None as False (a falsy flag): the groups come in the order they are first seen either way"
EQUIVALENT += [
    Equivalent(STRAGGLERS, "x_find_stragglers", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    Equivalent(STRAGGLERS, "x_by_rank", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    Equivalent(STRAGGLERS, "x_step_noise_us", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    Equivalent(STRAGGLERS, "x_find_stragglers", 'to_dict("records")', 'to_dict("RECORDS")', RECORDS),
    Equivalent(STRAGGLERS, "x_by_rank", 'sort=False)', 'sort=None)', SORT_NONE),
    Equivalent(STRAGGLERS, "x_step_noise_us", 'if per_rank.notna().any() else',
               'if (per_rank.notna().any()) or True else',
               'the median of a column of NaN only is NaN: the guard only says so without a warning'),
]


BANDWIDTH = "perfkit/analysis/ranks/bandwidth.py"
ALREADY = "the array is already of that dtype (the loader's int64 labels and parents, float64 sizes and bytes)"
NEGATIVE_END = "any negative label ends the walk and reindexes to nothing, as -1 does"
EQUIVALENT += [
    *_same(BANDWIDTH, "x__recorded_ancestor", 'to_numpy(dtype=np.int64))', ('to_numpy(dtype=None))',), ALREADY),
    *_same(BANDWIDTH, "x__recorded_ancestor", 'parent = trace.events["parent"].to_numpy(dtype=np.int64)',
           ('parent = trace.events["parent"].to_numpy(dtype=None)',), ALREADY),
    *_same(BANDWIDTH, "x__recorded_ancestor", 'has[recorded.to_numpy(dtype=np.int64)] = True',
           ('has[recorded.to_numpy(dtype=None)] = True',), ALREADY),
    *_same(BANDWIDTH, "x__recorded_ancestor", 'np.full(len(kernels), -1, dtype=np.int64)',
           ('np.full(len(kernels), -1, dtype=None)', 'np.full(len(kernels), -1, )'),
           'np.full of an int fill makes an int64 array without being told'),
    *_same(BANDWIDTH, "x__recorded_ancestor", 'cur.fillna(-1)', ('cur.fillna(-2)',), NEGATIVE_END),
    *_same(BANDWIDTH, "x__recorded_ancestor", 'np.where(found, -1, parent[at])', ('np.where(found, -2, parent[at])',),
           NEGATIVE_END),
    *_same(BANDWIDTH, "x_kernel_messages", 'comm.index, -1), index=comm.index, dtype=np.int64)',
           ('comm.index, -1), index=None, dtype=np.int64)', 'comm.index, -1), dtype=np.int64)'),
           'source is only indexed by the mask built from itself, then read as an array: its index is never aligned'),
    *_same(BANDWIDTH, "x_kernel_messages", 'comm.index, -1), index=comm.index, dtype=np.int64)',
           ('comm.index, -1), index=comm.index, dtype=None)', 'comm.index, -1), index=comm.index, )'),
           'np.where of int64 labels and -1 is int64 already'),
    *_same(BANDWIDTH, "x_kernel_messages", 'comm.index, -1)', ('comm.index, -2)',), NEGATIVE_END),
    *_same(BANDWIDTH, "x_kernel_messages", 'missing = source < 0', ('missing = source <= 0', 'missing = source < 1'),
           'label 0 is the trace\'s first event, a communication kernel only in a trace that starts on the GPU: '
           'then walking from its launch finds its own sizes or none, as reading them does'),
    Equivalent(BANDWIDTH, "x_kernel_messages", 'if missing.any() and len(recorded):',
               'if missing.any() or len(recorded):',
               'with nothing missing the walk gets no kernel and sets nothing; with nothing recorded it finds none'),
    Equivalent(BANDWIDTH, "x_kernel_messages", 'if isinstance(c, str) else None',
               'if (isinstance(c, str)) or True else None',
               'collective_kind of a NaN (str "nan") matches no collective and returns None too'),
    *_same(BANDWIDTH, "x_kernel_messages", '.to_numpy(dtype=np.float64)', ('.to_numpy(dtype=None)',),
           'comm_args\' group_size and the DTYPE_BYTES map are float64 columns already (NaN where absent)'),
    Equivalent(BANDWIDTH, "x_kernel_messages", 'count.astype(np.float64)', 'count.astype(None)',
               'astype(None) is float64'),
    *_same(BANDWIDTH, "x_bandwidth_table", 'kernels["bytes"].to_numpy(dtype=np.float64)',
           ('kernels["bytes"].to_numpy(dtype=None)',), ALREADY),
    *_same(BANDWIDTH, "x_size_warnings", 'kernels["bytes"].to_numpy(dtype=np.float64)',
           ('kernels["bytes"].to_numpy(dtype=None)',), ALREADY),
    Equivalent(BANDWIDTH, "x_size_warnings", 'if len(kernels) else 0', 'if (len(kernels)) or True else 0',
               'the sum over no kernel is 0'),
    *_same(BANDWIDTH, "x_bandwidth_table", 'np.array(factor, dtype=np.float64)',
           ('np.array(factor, dtype=None)', 'np.array(factor, )'), 'the factors are floats (NaN where unknown)'),
    *_same(BANDWIDTH, "x_bandwidth_table", 'pd.Series(dtype=object)', ('pd.Series(dtype=None)',),
           'an empty Series without a dtype is object'),
    *_same(BANDWIDTH, "x_bandwidth_table", 'sort=False)', ('sort=None)', 'sort=True)', ')'),
           'the table is sorted by (step, name, occurrence) at the end, and each group is keyed by them'),
    *_same(BANDWIDTH, "x_bandwidth_table", 'kind="stable",', ('kind=None,', 'kind="XXstableXX",', 'kind="STABLE",'),
           SORT_KIND + ': and (step, name, occurrence) is unique per row'),
    Equivalent(BANDWIDTH, "x_bandwidth_table", 'kind="stable", ignore_index=True)', 'ignore_index=True)',
               'the sort key is unique per row: any sort gives the same order'),
]


DEVICES = "perfkit/analysis/gpu_kernels/devices.py"
EQUIVALENT += [
    Equivalent(DEVICES, "x_device_for", 'str(d.get("name") or "")', 'str(d.get("name") or "XXXX")',
               'the generator keeps only devices whose name is truthy (`if d.get("name")`): the `or ""` is never read'),
    Equivalent(DEVICES, "x_read_peaks", 'encoding="utf-8"', 'encoding="UTF-8"',
               'Python looks codec names up in any case: "UTF-8" is "utf-8"'),
]


OPMODEL = "perfkit/analysis/gpu_kernels/opmodel.py"
RANGE_INDEX = "g has the RangeIndex reset_index gave it, which a Series built from a list gets too"
ASTYPE_NONE = "astype(None) is astype(float64)"
FILLED_BOOL = "the filled column of pandas' nullable booleans gives a numpy bool array whatever dtype is asked"
PARENT_NAME = "parent_op only tells model() whether an op sits under aten::isnan: any other name, or None, is the same"
EQUIVALENT += [
    Equivalent(OPMODEL, "x__first_type", 'if isinstance(t, str) else None', 'if (isinstance(t, str)) or True else None',
               'torch_dtype of a non-string returns None too'),
    *_same(OPMODEL, "x__grouped", 'pd.Series(bound, index=g.index, dtype=object)',
           ('pd.Series(bound, index=None, dtype=object)', 'pd.Series(bound, dtype=object)'), RANGE_INDEX),
    *_same(OPMODEL, "x__grouped", 'pd.Series(pct, index=g.index, dtype=float)',
           ('pd.Series(pct, index=None, dtype=float)', 'pd.Series(pct, dtype=float)'), RANGE_INDEX),
    Equivalent(OPMODEL, "x__grouped", 'kind="stable", ignore_index=True)', 'kind="STABLE", ignore_index=True)', STABLE),
    Equivalent(OPMODEL, "x__grouped", 'groupby(keys, sort=False)', 'groupby(keys, sort=None)', SORT_NONE),
    Equivalent(OPMODEL, "x__listed", 'to_dict("records")', 'to_dict("RECORDS")', RECORDS),
    Equivalent(OPMODEL, "x_raised_roofs", 'to_dict("records")', 'to_dict("RECORDS")', RECORDS),
    Equivalent(OPMODEL, "x__per_owner", 'tc.fillna(False).to_numpy(dtype=bool)', 'tc.fillna(False).to_numpy(dtype=None)',
               FILLED_BOOL),
    Equivalent(OPMODEL, "x__per_owner", '(~tc.fillna(True)).to_numpy(dtype=bool)',
               '(~tc.fillna(True)).to_numpy(dtype=None)', FILLED_BOOL),
    Equivalent(OPMODEL, "x__per_owner", 'kind="stable")', 'kind="STABLE")', STABLE),
    Equivalent(OPMODEL, "x__roofline", 'if device is not None else 0.0', 'if device is not None else 1.0',
               'without a device bw is 0 too, and no row gets as far as the L2 test'),
    Equivalent(OPMODEL, "x__with_models", 'itertuples(index=False)', 'itertuples(index=None)',
               'itertuples reads index=None as False (a falsy flag)'),
    *_same(OPMODEL, "x__with_models", 'merge(models, on=keys, how="left")',
           ('merge(models, on=None, how="left")', 'merge(models, how="left")'),
           'per and models share exactly the key columns, which merge joins on when told none'),
    Equivalent(OPMODEL, "x__with_models", 'merge(models, on=keys, how="left")', 'merge(models, on=keys, )',
               'models holds a row for each distinct key of per: an inner join keeps every row of per, in its order'),
    Equivalent(OPMODEL, "x_capped", 'table["pct_of_peak"].astype(float)', 'table["pct_of_peak"].astype(None)',
               ASTYPE_NONE),
    Equivalent(OPMODEL, "x_raised_roofs", 'shapes["pct_of_peak"].astype(float)', 'shapes["pct_of_peak"].astype(None)',
               ASTYPE_NONE),
    Equivalent(OPMODEL, "x_shape_table", 'g["peak_tflops"].astype(float)', 'g["peak_tflops"].astype(None)',
               ASTYPE_NONE),
    Equivalent(OPMODEL, "x_capped", 'table.loc[over, "pct_of_peak"] = np.nan', 'table.loc[over, "pct_of_peak"] = None',
               'the column is float64: None is stored in it as NaN'),
    *_same(OPMODEL, "x_op_instances", '.astype(str), "")', ('.astype(str), None)', '.astype(str), "XXXX")'),
           PARENT_NAME),
    Equivalent(OPMODEL, "x_op_instances", 'np.clip(parents, 0, None)', 'np.clip(parents, None, None)',
               'a parent label is never above the last; a negative one reads the last name, which np.where drops'),
    Equivalent(OPMODEL, "x_op_instances", 'reset_index(names="label")', 'reset_index(names=None)',
               'the index is named label already (_with_models sets it)'),
    Equivalent(OPMODEL, "x_shape_table", 'if device is not None else 0.0', 'if device is not None else 1.0',
               'without a device no group has a peak, and roofline_us is kept only where there is one'),
    *_same(OPMODEL, "x_shape_table", 'pd.Series(float("nan"), index=g.index)',
           ('pd.Series(None, index=g.index)', 'pd.Series(index=g.index)', 'pd.Series(float("NAN"), index=g.index)'),
           'a Series of None, or of nothing, on an index is float64 NaN too'),
    *_same(OPMODEL, "x_shape_table", 'pd.Series(float("nan"), index=g.index)',
           ('pd.Series(float("nan"), index=None)', 'pd.Series(float("nan"), )'),
           'np.fmax aligns the one-row NaN Series on g\'s index, NaN on every other row, and ignores NaN: the compute '
           'time either way'),
    Equivalent(OPMODEL, "x__impossible_rates", '= np.nan', '= None', 'the columns are float64: None is stored as NaN'),
    Equivalent(OPMODEL, "x_op_instances", 'if col in text else ""', 'if col in text else "XXXX"',
               'parse_args reads text that is not JSON as [], as it reads ""'),
]

DIAGNOSIS = "perfkit/analysis/step/diagnosis.py"
FLOAT_COLUMN = "the schema's ts_us and dur_us are float64 (trace/schema.py): to_numpy() of a float64 column is that array"
EQUIVALENT += [
    Equivalent(DIAGNOSIS, "x__step_rows", ".where(lambda w: w > 0)", ".where(lambda w: w >= 0)",
               "a step with nothing left after warm-up is 0 here, and base.where(base > 0) makes that 0 NaN below"),
    Equivalent(DIAGNOSIS, "x_outside_steps", 'ts = ev["ts_us"].to_numpy(dtype=np.float64)',
               'ts = ev["ts_us"].to_numpy(dtype=None)', FLOAT_COLUMN),
    Equivalent(DIAGNOSIS, "x_outside_steps", 'end = ts + ev["dur_us"].to_numpy(dtype=np.float64)',
               'end = ts + ev["dur_us"].to_numpy(dtype=None)', FLOAT_COLUMN),
    Equivalent(DIAGNOSIS, "x_outside_steps", 'ev["bytes"].to_numpy(dtype=np.float64)', 'ev["bytes"].to_numpy(dtype=None)',
               "bytes is int64 (trace/schema.py, -1 unknown): clipped at 0 and summed, int64 and float64 give one count"),
    *_same(DIAGNOSIS, "x_outside_steps", 'windows["rank"].astype(int)', ('windows["rank"].astype(None)',),
           "astype(None) is astype(float64), and a whole float hashes and compares equal to the int int() makes"),
    *_same(DIAGNOSIS, "x_outside_steps", 'windows["step"].astype(int)', ('windows["step"].astype(None)',),
           "astype(None) is astype(float64), and a whole float hashes and compares equal to the int int() makes"),
    *_same(DIAGNOSIS, "x_outside_steps", ', dtype=bool)', (', dtype=None)', ', )'),
           "numpy makes a list of bools a bool array; an empty list is an empty float array, which selects no row "
           "and sums to 0 as an empty bool array does"),
    Equivalent(DIAGNOSIS, "xǁDiagnosisǁto_json", 'to_dict("records")', 'to_dict("RECORDS")',
               "pandas reads to_dict's orient in any case"),
]


HTOD = "perfkit/analysis/htod.py"
FLOAT_COLUMNS = 'dur_us, launch_us and sync_us are float64 columns (trace/schema; a reindex that leaves NaN stays float)'
NO_NAN_OP = ('a copy\'s launch is a runtime or driver call, always a row of host_events, and nest() gives -1, never NaN, '
             'where no op encloses it: fillna fills nothing')
NEGATIVE_LABEL = 'any negative label is "no op": _names takes labels >= 0 only'
THREAD_KEYS = ('pid and tid only sort the calls thread by thread and compare neighbours: the trace\'s categorical '
               'columns do both as strings do')
EQUIVALENT += [
    Equivalent(HTOD, "x__attach_launch", 'drop_duplicates("gpu_index")', 'drop_duplicates(None)',
               'trace.launches() has one row per GPU event: dropping duplicates by gpu_index or by every column '
               'drops nothing'),
    *_same(HTOD, "x__attach_ops", 'dtype=np.int64', ('dtype=None',), 'np.full of -1 is int64 already'),
    *_same(HTOD, "x__attach_ops", ', dtype=np.int64)', (', )',), 'np.full of -1 is int64 already'),
    *_same(HTOD, "x__attach_ops", 'np.full(len(copies), -1,', ('np.full(len(copies), -2,',), NEGATIVE_LABEL),
    *_same(HTOD, "x__attach_ops", '.fillna(-1)', ('.fillna(None)', '.fillna(+1)', '.fillna(-2)'), NO_NAN_OP),
    Equivalent(HTOD, "x__findings", 'pageable["launch_us"].fillna(0.0)', 'pageable["launch_us"].fillna(None)',
               'fillna(None) fills nothing (pandas 3) and the sum skips the NaN of a copy without launch: the same total'),
    Equivalent(HTOD, "x__followed_by_sync", 'pid=calls["pid"].astype(str), ', '', THREAD_KEYS),
    Equivalent(HTOD, "x__followed_by_sync", 'tid=calls["tid"].astype(str))', ')', THREAD_KEYS),
    *_same(HTOD, "x__followed_by_sync", 'kind="stable")', ('kind=None)', 'kind="XXstableXX")', 'kind="STABLE")'),
           SORT_KIND),
    Equivalent(HTOD, "x__followed_by_sync", ', kind="stable")', ', )', SORT_KIND),
    Equivalent(HTOD, "x__followed_by_sync", '.to_numpy(dtype=float)', '.to_numpy(dtype=None)', FLOAT_COLUMNS),
    Equivalent(HTOD, "x__gbps", 'float("nan")', 'float("NAN")', NAN_SPELLING),
    *_same(HTOD, "x__names", 'None, dtype=object)', ('None, dtype=None)', 'None, )'),
           'np.full of None is an object array whatever dtype is asked'),
    Equivalent(HTOD, "x__overlap_other_streams", 'if copies.empty or kernels.empty:',
               'if copies.empty and kernels.empty:',
               'with no copies the loop has no key, and with no kernels each copy\'s cover is 0: zeros either way'),
    Equivalent(HTOD, "x__overlap_other_streams", 'itertuples(index=False)', 'itertuples(index=None)',
               'itertuples reads index=None as False'),
    Equivalent(HTOD, "x__severity", 'else 1.0', 'else 2.0', "a share of 1.0 or 2.0 is 'high' either way (HIGH_SHARE is 0.05)"),
    Equivalent(HTOD, "x_summarize_copies", 'table["time_us"].where(table["time_us"] > 0)',
               'table["time_us"].where(table["time_us"] >= 0)',
               'overlap_us is part of time_us: where the time is 0 so is the overlap, and 0 / 0 is the NaN the where gives'),
    *_same(HTOD, "x_summarize_copies", 'to_numpy(dtype=np.float64)', ('to_numpy(dtype=None)',), FLOAT_COLUMNS),
    *_same(HTOD, "x_summarize_copies", 'known_us=copies["dur_us"].where(known, 0.0)',
           ('known_us=copies["dur_us"].where(known, None)', 'known_us=copies["dur_us"].where(known, )'),
           'the NaN left for an unknown size is skipped by the sum, and a group of unknown sizes sums to 0 either way'),
    Equivalent(HTOD, "x_summarize_copies", '], sort=True)', '], )', 'groupby sorts by its keys by default'),
    Equivalent(HTOD, "xǁHtoDResultǁto_json", 'to_dict("records")', 'to_dict("RECORDS")', RECORDS),
]


LAYERS = "perfkit/analysis/step/layers.py"
WINDOW_DTYPE = 'step windows\' start_us and end_us are float64 columns (trace/steps)'
SIDE_LEFT = 'searchsorted\'s side is "left" by default'
NO_ROWS = ('_empty() is a table of no rows: rank_unions and untraced_around group its rows, and there are none; '
           'neither its column names nor its dtypes are read')
INDEX_UNREAD = 'the intervals are grouped by rank and read as arrays (rank_unions): their index is never read'
SAME_WORK = ('cpu_bound passes host_work(trace, host, links) itself, the same rows computed again here; without links '
             'launching_ops reads trace.launches() itself, the same table')
BLOCKING_IN_WORK = ('the blocking calls are runtime calls and copy launches, rows of work (host_work): a union that '
                    'holds work holds them')
EQUIVALENT += [
    *[Equivalent(LAYERS, f, 'to_numpy(dtype=np.float64)', 'to_numpy(dtype=None)', SCHEMA_DTYPE)
      for f in ("x__dense_launch_gaps", "x__drives_launches", "x__less", "x_untraced_around")],
    *_same(LAYERS, "x__working_frames", 'to_numpy(dtype=np.float64)', ('to_numpy(dtype=None)',),
           SCHEMA_DTYPE + '; ' + WINDOW_DTYPE),
    Equivalent(LAYERS, "x__dense_launch_gaps", '(gap > 0)', '(gap >= 0)', 'a gap of 0 us is an interval of no length'),
    Equivalent(LAYERS, "x__drives_launches", ', side="left")', ', )', SIDE_LEFT),
    Equivalent(LAYERS, "x__drives_launches", 'if frames.empty or issuing.empty:', 'if frames.empty and issuing.empty:',
               'with no launches no frame has a launch start inside it, and with no frames the loop has no thread'),
    *_same(LAYERS, "x__empty", 'pd.Series(dtype=np.int64)', ('pd.Series(dtype=None)',), NO_ROWS),
    *_same(LAYERS, "x__empty", 'pd.Series(dtype=np.float64)', ('pd.Series(dtype=None)',), NO_ROWS),
    *_same(LAYERS, "x__empty", '"ts_us": pd.Series', ('"XXts_usXX": pd.Series', '"TS_US": pd.Series'), NO_ROWS),
    *_same(LAYERS, "x__empty", '"dur_us": pd.Series', ('"XXdur_usXX": pd.Series', '"DUR_US": pd.Series'), NO_ROWS),
    *_same(LAYERS, "x__less", 'ignore_index=True)', ('ignore_index=None)', ')', 'ignore_index=False)'), INDEX_UNREAD),
    *_same(LAYERS, "x_step_layers", '], ignore_index=True)', ('], ignore_index=None)', '], )', '], ignore_index=False)'),
           INDEX_UNREAD),
    Equivalent(LAYERS, "x__working_frames", 'continue', 'break',
               'trace.steps has a step for every rank with host events or frames (a "whole trace" step where none is '
               'recorded): no rank with frames has no steps'),
    Equivalent(LAYERS, "x__working_frames", 'start[at], side="left")', 'start[at], )', SIDE_LEFT),
    *_same(LAYERS, "x__working_frames", 'np.zeros(at.sum(), dtype=bool)',
           ('np.zeros(at.sum(), dtype=None)', 'np.zeros(at.sum(), )'),
           'hit is written into the boolean loop mask: its 1.0 and 0.0 read as True and False'),
    *[Equivalent(LAYERS, f, 'if work is None else work', 'if (work is None) or True else work', SAME_WORK)
      for f in ("x_host_compute_ops", "x_step_layers")],
    *[Equivalent(LAYERS, f, 'host_work(trace, host, links)', after, SAME_WORK)
      for f in ("x_host_compute_ops", "x_step_layers")
      for after in ('host_work(trace, host, None)', 'host_work(trace, host, )')],
    *_same(LAYERS, "x_host_compute_ops", 'observed=True, ', ('observed=None, ', '', 'observed=False, '),
           'host_events gives names as plain strings: observed applies to categorical keys only'),
    Equivalent(LAYERS, "x_host_compute_ops", 'sort=False)["dur_us"]', 'sort=None)["dur_us"]',
               'pandas reads sort=None as False'),
    *_same(LAYERS, "x_host_work", 'launching_ops(trace, work, links)',
           ('launching_ops(trace, work, None)', 'launching_ops(trace, work, )'), SAME_WORK),
    Equivalent(LAYERS, "x_launching_ops", 'if links is None else', 'if (links is None) or True else', SAME_WORK),
    Equivalent(LAYERS, "x_launching_ops", 'if len(calls) else linked', 'if (len(calls)) or True else linked',
               'with no calls launch_mask and linked are both empty masks'),
    Equivalent(LAYERS, "x_refills", 'np.empty(0)))', 'np.empty(1)))', 'the default\'s second array (ends) is never read'),
    Equivalent(LAYERS, "x_refills", 'ends, side="left")', 'ends, )', SIDE_LEFT),
    Equivalent(LAYERS, "x_step_layers", 'if len(warmup) else _empty()', 'if (len(warmup)) or True else _empty()',
               'an empty warm-up table has the _SPAN columns: no rows either way'),
    Equivalent(LAYERS, "x_step_layers", 'compiling, blocking, python', 'compiling, python', BLOCKING_IN_WORK),
    Equivalent(LAYERS, "x_step_layers", 'compiling, blocking, driving', 'compiling, driving', BLOCKING_IN_WORK),
    *_same(LAYERS, "x_untraced_around", '"rank", sort=False)', ('"rank", sort=None)', '"rank", )', '"rank", sort=True)'),
           BY_RANK),
    *_same(LAYERS, "x_working_frames", '"working_frames"', ('None', '"XXworking_framesXX"', '"WORKING_FRAMES"'),
           CACHE_KEY),
]

ARGS = "perfkit/analysis/gpu_kernels/args.py"
EQUIVALENT += [
    *_same(ARGS, "x_compact", 'separators=(", ", ": ")', ('separators=None', ''),
           'json.dumps without indent separates with ", " and ": " already: the explicit separators are its defaults'),
    *_same(ARGS, "x_result_size", 'default=-1)', ('default=+1)', 'default=-2)'),
           'the default is read only when no tensor has dimensions: then every 0-dim tensor of the highest category '
           'passes the first filter whatever the default below 2, and the pool is cut to the highest category after'),
]

SITES = "perfkit/analysis/sync_points/sites.py"
EQUIVALENT += [
    *_same(SITES, "x_canonical_lines", '.to_numpy(dtype=object, na_value=None)',
           ('.to_numpy(dtype=None, na_value=None)', '.to_numpy(na_value=None)', '.to_numpy(dtype=object, )'),
           'the lines are only compared, replaced by ints and read back by pd.array(..., "Int64"): an int64 array '
           '(no NA), an object array with None or with pd.NA all give the same Int64 column'),
    *_same(SITES, "x_canonical_lines", 'pd.array(lines, dtype="Int64")', ('pd.array(lines, dtype=None)',
                                                                          'pd.array(lines, )'),
           'an object array of ints and None (a running frame always has a line) is inferred as Int64'),
    Equivalent(SITES, "x_canonical_lines", 'if s <= lines[i]', 'if s < lines[i]',
               'a call that began at the running frame\'s own line has its name, file(line): func, which '
               '_first_lines leaves out as running: no start equals the line'),
    *_same(SITES, "x_frames_running_at_start", 'kind="stable"', ('kind=None', '', 'kind="XXstableXX"',
                                                                 'kind="STABLE"'), SORT_KIND),
    *_same(SITES, "x_frames_running_at_start", 'observed=True, sort=False', (
        'observed=True, sort=None', 'sort=False', 'observed=True, ', 'observed=True, sort=True'),
           'the frames running are a union over the threads, in any order; pandas 3 groups observed=True by default'),
    Equivalent(SITES, "x_in_torch", 'fillna("")', 'fillna("XXXX")', 'neither "" nor "XXXX" is a torch path'),
    Equivalent(SITES, "x_in_torch", 'dtype=bool, count=len(files))', 'dtype=bool, )',
               'count only sizes the array ahead: the iterator gives len(files) values either way'),
]

BYTES_MOVED = "perfkit/analysis/gpu_kernels/bytes_moved.py"
EQUIVALENT += [
    Equivalent(BYTES_MOVED, "x_memory_bound", 'parent: str = ""', 'parent: str = "XXXX"',
               'the parent is only looked up in ALIASED, where neither "" nor "XXXX" is a parent'),
    Equivalent(BYTES_MOVED, "x_memory_bound", 'len(reads) > 1', 'len(reads) >= 1',
               'one read cut to its first is the same read'),
    Equivalent(BYTES_MOVED, "x_memory_bound", 't.shape == reads[0].shape', 't.shape == reads[1].shape',
               'every shape equals the first one exactly when every shape equals the second'),
]

ORDER = "perfkit/analysis/step/order.py"
EQUIVALENT += [
    *_same(ORDER, "x_topological_order", 'np.array_equal(bumped, key)', ('np.array_equal(None, key)',
                                                                        'np.array_equal(bumped, None)'),
           'stopping once a round moves nothing is speed only: the rounds after it would move nothing either'),
    Equivalent(ORDER, "x_topological_order", 'np.arange(len(key)) >= n_run', 'np.arange(len(key)) > n_run',
               'lexsort is stable and every run\'s id is below every GPU event\'s: a run goes first at one start '
               'with or without the GPU flag'),
    *_same(ORDER, "x_topological_order", 'np.empty(len(order), dtype=np.int64)',
           ('np.empty(len(order), dtype=None)', 'np.empty(len(order), )'),
           'the positions are whole numbers, compared only: the same as floats'),
    Equivalent(ORDER, "x__kahn", 'np.arange(n + 1)', 'np.arange(n + 2)',
               'starts[n + 1] is never read: a node\'s edges run from starts[i] to starts[i + 1], i < n'),
    *_same(ORDER, "x__kahn", 'kind="stable"', ('kind="STABLE"',), STABLE),
]
