"""perfkit.workloads."""
