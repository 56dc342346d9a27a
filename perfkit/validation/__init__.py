"""Does perfkit report what this machine does? ``validate(device)`` runs the reference workloads,
each pathology and its fix, through the harnesses (``perfkit.bench``), detectors
(``perfkit.detect``) and analyses they exercise, and checks each figure against what the workload
must show. ``checks`` holds one function per check, ``suite`` runs them into a ``ValidationReport``.
"""
from .suite import ValidationReport, validate

__all__ = ["ValidationReport", "validate"]
