"""perfkit.analysis."""
