"""perfkit.bench."""
