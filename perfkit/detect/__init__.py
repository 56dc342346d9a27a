"""perfkit.syncs."""
