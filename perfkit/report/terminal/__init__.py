"""The text ``perfkit <command>`` prints for people: one module per command (``perfkit critical-path``:
``critical_path``), each turning the command's result (or its ``to_json()`` dict) into the lines it prints.
``perfkit/cli/<command>.py`` parses, calls the analysis and prints what these return; ``--json`` output is the
result's own ``to_json()``."""
