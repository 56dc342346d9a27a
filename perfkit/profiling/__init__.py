"""Record the user's own code under the PyTorch profiler and diagnose the trace (``perfkit profile``).

A package of its own rather than ``perfkit/bench`` (and not named ``profile``, so that the
package never shadows the ``perfkit.profile`` context manager): the harnesses in ``bench`` measure workloads
they build, while this runs the user's script (through ``perfkit.detect.script``), records, loads and
diagnoses, so it sits above ``analysis`` next to ``report``. ``recorder`` runs torch (the schedule and
the step hooks), ``stepfn`` finds and wraps a ``--step`` function (or says why it cannot be one), ``watch``
guards the recording against what the script does (fork, exec, its own profiler, signals), ``output`` writes
the trace where asked, ``session`` composes a run, ``diagnosis`` is the one call that picks the verdict.
"""
