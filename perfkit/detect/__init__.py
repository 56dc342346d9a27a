"""perfkit.detect: sync points found at run time (runtime.py, runtime_ops.py) and in source code (static.py, checker.py, sync_rules.py)."""
