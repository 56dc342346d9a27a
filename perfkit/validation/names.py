"""The names of the validation checks and presets, for ``perfkit validate --help``, which must not
import the harnesses and workloads behind them (pandas, torch). ``checks.CHECKS`` and ``checks.PRESETS``
hold the checks themselves, in this order (tests/test_validation.py holds the two to each other)."""
from __future__ import annotations

CHECK_NAMES = ("htod_pinned_vs_pageable", "runtime_syncs_ppo", "trace_syncs_ppo", "mppi_from_numpy",
               "replay_device_normalize", "compile_ab_mlp", "amp_bf16_step", "gradscaler_syncs", "leak_slope")
PRESET_NAMES = ("full", "quick")
