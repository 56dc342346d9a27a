"""The ``sitecustomize`` that records each process of a job ``perfkit profile`` launched (its folder goes on
``PYTHONPATH``; see :mod:`perfkit.profiling.child`)."""
