"""A small suite of standard tensor ops timed with confidence intervals, compared across devices,
dtypes and thread counts, with the environment report beside it.

``op_suite()`` builds each op (matmul, conv2d, elementwise add, sum reduction, copy) once per
configuration (device, dtype, intra-op threads) and runs interleaved A/B comparisons through
``perfkit.bench.compare`` (warm-up, synchronization, seeded interleaving, a bootstrap CI on the
ratio and a verdict that never defaults to "significant"):

* ``device``: every other device against the first, in float32 (cpu vs cuda when both exist);
* ``dtype``: every other dtype against float32, on each device;
* ``threads`` (CPU only): every other thread count against one thread, in float32.

Each configuration's own time (median, with a percentile-bootstrap CI of the median) comes from
the samples of the first comparison it takes part in. Throughput is GFLOP/s for compute ops
(matmul 2n^3, conv 2*B*Cout*H*W*Cin*k^2) and GB/s of bytes read plus written for memory ops.
Thread counts are compared in alternating blocks (A B B A ...) with ``torch.set_num_threads``
called between blocks, never inside a timed call: resizing OpenMP's pool costs milliseconds
(about 8 ms per switch on a shared 2-core machine, larger than the ops themselves), so a
per-call switch would time the switch. Blocks are compared unpaired (``stats.ratio_test``). The
thread count is restored at the end; when several threads are slower than one, the machine is
usually oversubscribed.

The result types and the advice drawn from them are in ``opsuite_result``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..device import resolve_device
from ..errors import ParameterError
from ..stats import ratio_test
from .compare import ABResult, compare, environment
from .environment import environment_report
from .opsuite_result import OpComparison, OpSuiteResult, OpTiming, Setting
from .timing import sample_warnings, time_call, time_callable

# torch is heavy and optional: the functions below import it when the suite runs.


@dataclass(frozen=True)
class Preset:
    """Problem sizes and how long each comparison runs (seconds of timed work, both sides)."""

    matmul_n: int
    conv: tuple[int, int, int, int]  # batch, channels (in = out), height = width, kernel
    elements: int
    min_time_s: float
    min_repeats: int


PRESETS = {
    # ~1 ms per op on one CPU core: the whole CPU suite in a few seconds (CI).
    "quick": Preset(matmul_n=256, conv=(4, 16, 32, 3), elements=2**20, min_time_s=0.1, min_repeats=10),
    # GPU-sized work: tens of ms per op on a CPU, enough to saturate a GPU's memory bandwidth.
    "full": Preset(matmul_n=2048, conv=(32, 64, 64, 3), elements=2**26, min_time_s=1.0, min_repeats=20),
}


@dataclass(frozen=True)
class OpSpec:
    """One op: ``build(device, dtype, preset) -> fn`` returns a zero-argument callable with its
    inputs allocated; ``work(preset, itemsize)`` is FLOPs (unit "GFLOP/s") or bytes ("GB/s")."""

    name: str
    unit: str
    build: Callable
    work: Callable


def _tensors(device, dtype, *shapes):
    import torch

    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g).to(device=device, dtype=dtype) for s in shapes]


def _matmul(device, dtype, p: Preset):
    import torch

    a, b, out = _tensors(device, dtype, (p.matmul_n,) * 2, (p.matmul_n,) * 2, (p.matmul_n,) * 2)
    return lambda: torch.mm(a, b, out=out)


def _conv(device, dtype, p: Preset):
    import torch.nn.functional as F

    batch, ch, hw, k = p.conv
    x, w = _tensors(device, dtype, (batch, ch, hw, hw), (ch, ch, k, k))
    return lambda: F.conv2d(x, w, padding=k // 2)


def _add(device, dtype, p: Preset):
    import torch

    a, b, out = _tensors(device, dtype, (p.elements,), (p.elements,), (p.elements,))
    return lambda: torch.add(a, b, out=out)


def _sum(device, dtype, p: Preset):
    (a,) = _tensors(device, dtype, (p.elements,))
    return lambda: a.sum()


def _copy(device, dtype, p: Preset):
    src, dst = _tensors(device, dtype, (p.elements,), (p.elements,))
    return lambda: dst.copy_(src)


def _conv_flops(p: Preset, itemsize: int) -> float:
    batch, ch, hw, k = p.conv
    return 2.0 * batch * ch * hw * hw * ch * k * k


OPS = {spec.name: spec for spec in (
    OpSpec("matmul", "GFLOP/s", _matmul, lambda p, s: 2.0 * p.matmul_n**3),
    OpSpec("conv2d", "GFLOP/s", _conv, _conv_flops),
    OpSpec("add", "GB/s", _add, lambda p, s: 3.0 * p.elements * s),
    OpSpec("sum", "GB/s", _sum, lambda p, s: 1.0 * p.elements * s),
    OpSpec("copy", "GB/s", _copy, lambda p, s: 2.0 * p.elements * s),
)}


def op_suite(*, preset: str | Preset = "quick", ops: Sequence = tuple(OPS), devices: Sequence[str] | None = None,
             dtypes: Sequence[str] = ("float32", "bfloat16"), threads: Sequence[int] | None = None,
             environment=None, seed: int = 0, clock=None) -> OpSuiteResult:
    """Time the standard ops in every setting and compare along each axis (module docstring).

    ``preset``: a name in ``PRESETS`` or a ``Preset``. ``ops``: names in ``OPS`` or ``OpSpec``
    objects. ``devices``: default "cpu" plus "cuda" when
    a GPU is visible. ``dtypes``: names of torch dtypes, float32 first or added. ``threads``: CPU
    intra-op thread counts (default 1 and the current count). ``environment``: a prebuilt
    ``EnvironmentReport`` (default: ``environment_report()`` now). ``clock`` is passed to
    ``compare``. Raises ParameterError for an unknown preset, op, device or dtype.
    """
    import torch

    p, specs = _check(preset, ops, dtypes)
    devs = _devices(devices)
    thread_counts = _threads(threads)
    before = torch.get_num_threads()
    try:
        env = environment if environment is not None else environment_report()
        timings, comparisons, warns = _run(specs, p, _settings(devs, dtypes, thread_counts), seed, clock)
    finally:
        torch.set_num_threads(before)
    if len(thread_counts) < 2 and "cpu" in devs:
        warns.append(f"only {thread_counts[0]} intra-op thread available: no thread-count comparison")
    name = preset if isinstance(preset, str) else "custom"
    return OpSuiteResult(tuple(timings), tuple(comparisons), env, name, tuple(warns + _ab_warnings(comparisons)))


def _ab_warnings(comparisons) -> list[str]:
    """The machine-load warning once, and how many comparisons carry measurement warnings."""
    load = list(dict.fromkeys(w for c in comparisons for w in c.ab.warnings if w.startswith("load average")))
    noisy = [f"{c.op} {c.axis}" for c in comparisons if any(not w.startswith("load average") for w in c.ab.warnings)]
    if noisy:
        load.append(f"{len(noisy)} of {len(comparisons)} comparisons have measurement warnings ({', '.join(noisy)}): "
                    "see comparisons[i].ab.warnings")
    return load


def _check(preset: str, ops, dtypes) -> tuple[Preset, list[OpSpec]]:
    import torch

    if not isinstance(preset, Preset) and preset not in PRESETS:
        raise ParameterError(f"preset={preset!r}: use one of {', '.join(PRESETS)} (or a Preset)")
    unknown = [o for o in ops if not isinstance(o, OpSpec) and o not in OPS]
    if unknown or not ops:
        raise ParameterError(f"ops={list(ops)!r}: use some of {', '.join(OPS)} (or OpSpec objects)")
    bad = [d for d in dtypes if not isinstance(getattr(torch, str(d), None), torch.dtype)]
    if bad or not dtypes:
        raise ParameterError(f"dtypes={list(dtypes)!r}: pass torch dtype names, e.g. ('float32', 'bfloat16')")
    chosen = preset if isinstance(preset, Preset) else PRESETS[preset]
    return chosen, [o if isinstance(o, OpSpec) else OPS[o] for o in ops]


def _devices(devices) -> list[str]:
    import torch

    if devices is None:
        return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    out = list(dict.fromkeys(resolve_device(d) for d in devices))
    if not out:
        raise ParameterError("devices=[]: pass at least one device, e.g. ('cpu', 'cuda')")
    return out


def _threads(threads) -> list[int]:
    import torch

    counts = sorted({1, torch.get_num_threads()}) if threads is None else list(dict.fromkeys(threads))
    if not counts or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in counts):
        raise ParameterError(f"threads={threads!r}: pass positive ints, e.g. (1, 4)")
    return counts


def _settings(devices: list[str], dtypes, thread_counts: list[int]) -> list[tuple[str, Setting, Setting]]:
    """(axis, A, B) pairs: devices vs the first, dtypes vs float32, threads vs the fewest."""
    base_threads = thread_counts[0]
    names = ["float32"] + [d for d in dtypes if d != "float32"]

    def at(device, dtype="float32"):
        return Setting(device, dtype, base_threads if device == "cpu" else None)

    pairs = [("device", at(devices[0]), at(d)) for d in devices[1:]]
    pairs += [("dtype", at(d), at(d, t)) for d in devices for t in names[1:]]
    if "cpu" in devices:
        pairs += [("threads", at("cpu"), replace(at("cpu"), threads=n)) for n in thread_counts[1:]]
    return pairs or [("", at(devices[0]), None)]


def _run(specs, p: Preset, pairs, seed: int, clock):
    """Compare every pair for every op; a lone setting (pair B None) is only timed."""
    timings: dict[tuple[str, Setting], OpTiming] = {}
    comparisons, warns = [], []
    for spec in specs:
        for axis, a, b in pairs:
            try:
                fa, fb = _callable(spec, a, p), b and _callable(spec, b, p)
            except (RuntimeError, NotImplementedError) as exc:
                warns.append(f"{spec.name} skipped for {a.label}{f' vs {b.label}' if b else ''}: "
                             f"{str(exc).splitlines()[0]}")
                continue
            if b is None:
                _set_threads(a)
                alone = time_callable(fa, min_time_s=p.min_time_s, min_repeats=p.min_repeats, warmup=2,
                                      device=a.device, clock=clock)
                timings.setdefault((spec.name, a), _timing(spec, a, alone.samples, p))
                continue
            if axis == "threads":
                ab = _thread_ab((fa, fb), (a, b), p, clock)
            else:
                _set_threads(a)
                ab = compare(fa, fb, labels=(a.label, b.label), device=_sync_device(a, b), min_time_s=p.min_time_s,
                             min_repeats=p.min_repeats, warmup=2, seed=seed, clock=clock)
            for setting, samples in ((a, ab.samples_a), (b, ab.samples_b)):
                timings.setdefault((spec.name, setting), _timing(spec, setting, samples, p))
            comparisons.append(OpComparison(spec.name, axis, a, b, ab))
    return list(timings.values()), comparisons, warns


def _callable(spec: OpSpec, s: Setting, p: Preset):
    import torch

    fn = spec.build(s.device, getattr(torch, s.dtype), p)
    fn()  # fail here (unsupported dtype on this device) rather than inside the timing loop
    return fn


def _set_threads(s: Setting) -> None:
    import torch

    if s.threads is not None and torch.get_num_threads() != s.threads:
        torch.set_num_threads(s.threads)


def _thread_ab(fns, settings, p: Preset, clock) -> ABResult:
    """Blocks of CPU samples, A B B A ..., the thread count switched between blocks; the first
    call after a switch (the pool resizing) is not timed."""
    clk = clock or time.perf_counter
    samples, order, spent, rounds = ([], []), [], 0.0, 0
    block = max(2, p.min_repeats // 2)
    while rounds < 50 and (min(len(samples[0]), len(samples[1])) < p.min_repeats or spent < p.min_time_s):
        for side in ((0, 1) if rounds % 2 == 0 else (1, 0)):
            _set_threads(settings[side])
            fns[side]()
            for _ in range(block):
                samples[side].append(time_call(fns[side], device="cpu", clock=clk))
                order.append(side)
                spent += samples[side][-1]
        rounds += 1
    labels = (settings[0].label, settings[1].label)
    warns = tuple(w for label, x in zip(labels, samples) for w in sample_warnings(label, x, 1))
    return ABResult(labels, tuple(samples[0]), tuple(samples[1]), tuple(order), ratio_test(samples[0], samples[1]),
                    warmup=1, warnings=warns, environment=environment("cpu", clk))


def _sync_device(a: Setting, b: Setting) -> str:
    return next((s.device for s in (a, b) if s.device != "cpu"), "cpu")


def _timing(spec: OpSpec, s: Setting, samples, p: Preset) -> OpTiming:
    import torch

    itemsize = torch.empty((), dtype=getattr(torch, s.dtype)).element_size()
    return OpTiming(spec.name, s, tuple(samples), float(spec.work(p, itemsize)), spec.unit)
