"""CPU threads: a CPU-only trace's ops run on torch's intra-op threads, and those compete for the cores with
whatever else runs there.

On a loaded 2-core machine ``torch.set_num_threads(1)`` took one training step from 375 to 65 ms (5.7x;
issue 53): each multi-threaded op waits for its slowest thread, and a thread that loses its core stalls the
op. The competition is seen when the load ``perfkit profile`` recorded (``trace.recorded``) exceeds the CPUs
(``perfkit.cpus.busy``, the rule the A/B harness warns by), or DataLoader workers run beside threads that
already take every core (torch's default is one intra-op thread per physical core). What to do is an A/B,
not a rule: ``perfkit.compare`` of the step with 1 thread against N.
"""
from __future__ import annotations

from ...results import Finding
from ...trace.recorded import Machine


def workers_running(annotations) -> bool:
    """The trace's DataLoader iterator is the multi-process one: ``num_workers`` is already above 0."""
    return annotations is not None and len(annotations) > 0 and \
        annotations["name"].astype(str).str.contains("_MultiProcessingDataLoaderIter", regex=False).any()


def competition(machine: Machine, annotations) -> list[str]:
    """What the intra-op threads of a CPU-only trace compete with ([] when nothing is seen)."""
    out = []
    if machine.busy:
        out.append(f"the machine was busy while recording ({machine.text()}): more runnable tasks than CPUs")
    threads, cpus = machine.torch_threads, machine.cpus
    if workers_running(annotations) and (threads is None or cpus is None or threads >= cpus):
        took = (f"its {threads} intra-op threads, which already take the {cpus} CPUs" if threads and cpus else
                "torch's default intra-op threads, one per physical core")
        out.append(f"DataLoader workers share the cores with {took}")
    return out


def ab_text(machine: Machine) -> str:
    """The A/B to run: the step with 1 intra-op thread against the count it ran with."""
    n = machine.torch_threads or machine.cpus or "N"
    return (f"time the step both ways: perfkit.compare(lambda: (torch.set_num_threads({n}), step()), "
            f"lambda: (torch.set_num_threads(1), step()), labels=('{n} threads', '1 thread')); keep the faster "
            "count (torch.set_num_threads at the start of the script, or OMP_NUM_THREADS)")


def threads_advice(machine: Machine) -> str:
    """The thread-count clause of the CPU-only fix: set the count only where the trace says it is off (more
    threads than CPUs, or one thread on an idle multi-core machine); otherwise, the count being unknown or
    already one per CPU, the A/B that decides it."""
    threads, cpus = machine.torch_threads, machine.cpus
    if threads and cpus and threads > cpus:
        return f"set torch.set_num_threads to the {cpus} CPUs the process may use (it ran {threads} threads)"
    if threads == 1 and cpus and cpus > 1 and machine.known and not machine.busy:
        return f"raise torch.set_num_threads toward the {cpus} CPUs (it ran 1 thread on an idle machine)"
    known = f"torch ran {threads} threads on {cpus} CPUs; " if threads and cpus else ""
    return (f"time torch.set_num_threads(1) against the default with perfkit.compare ({known}on shared cores fewer "
            "threads are often faster)")


def cpu_fix_parts(machine: Machine, annotations) -> tuple[str, str]:
    """Two parts of the CPU-only fix: a sentence on intra-op threads that compete for the cores with the A/B
    to run ("" when nothing is seen to compete), and the thread-count clause of its list of host fixes
    (``threads_advice``; "" when the sentence says it)."""
    why = competition(machine, annotations)
    if why:
        return f" Its ops run on intra-op threads that compete for the cores ({'; '.join(why)}): {ab_text(machine)}.", ""
    return "", f", {threads_advice(machine)}"


def threads_finding(verdict: str, machine: Machine, annotations) -> list[Finding]:
    """A CPU-only trace whose intra-op threads compete with other processes: the A/B to run."""
    why = competition(machine, annotations) if verdict == "CPU-only trace" else []
    if not why:
        return []
    return [Finding("medium", f"CPU ops run on intra-op threads that compete for the cores: {'; '.join(why)}",
                    {"load_1min": machine.load_1min, "cpus": machine.cpus, "torch_threads": machine.torch_threads,
                     "dataloader_workers": workers_running(annotations)},
                    _sentence(ab_text(machine)) + ". Ops that wait for a descheduled thread make step times swing; the A/B "
                    "harness warns the same way on a loaded machine.",
                    "load average above the CPUs (perfkit.cpus.busy), or DataLoader workers beside intra-op "
                    "threads that take every core")]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
