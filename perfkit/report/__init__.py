"""perfkit.report."""
