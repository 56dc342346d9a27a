"""The op-shapes pass (perfkit.trace.loader.shapes): chunks decoded by forked workers give the table one
decoder gives, in every layout; a chunk cut between objects nested in args falls back to one decoder; the rows are
those a plain json read counts."""
import gzip
import json
import subprocess
import sys

import pytest

from perfkit.trace.loader import shapes
from perfkit.trace.loader.workers import default_workers

from conftest import shared_trace


def _doc(name: str) -> dict:
    path = shared_trace(name)
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(tmp_path, doc: dict, layout: str, gz: bool):
    if layout == "compact":
        text = json.dumps(doc)
    elif layout == "lines":
        events = ",\n".join(json.dumps(e) for e in doc["traceEvents"])
        rest = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[1:-1]
        text = "{" + rest + (", " if rest else "") + '"traceEvents": [\n' + events + "\n]}"
    else:
        text = json.dumps(doc, indent=2)
    data = text.encode()
    path = tmp_path / f"{layout}.json{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _counted(doc: dict) -> int:
    return sum(1 for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "operator", "Operator")
               and e.get("ph") == "X" and "Input Dims" in (e.get("args") or {}) and isinstance(e.get("ts"), (int, float)))


# The workers are forked, which perfkit does only from a process with one thread; a test process may
# hold threads left by earlier tests, so the pass runs in a fresh interpreter.
_CHILD = """
import json, sys
from pathlib import Path
import pandas as pd
from perfkit.trace.loader import shapes
path, shapes.CHUNK_BYTES = Path(sys.argv[1]), int(sys.argv[2])
ran, parallel = [], shapes._parallel
shapes._parallel = lambda text, spans: ran.append((len(spans), (r := parallel(text, spans)) is not None)) or r
table = shapes._parse(path)
shapes.will_fork = lambda: False
pd.testing.assert_frame_equal(table, shapes._parse(path), check_exact=True)  # one decoder's table
print(json.dumps({"ran": ran, "rows": len(table)}))
"""


def _pass_in_a_fresh_process(path, chunk_bytes: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(chunk_bytes)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("layout,gz", [("pretty", True), ("lines", False), ("compact", False)])
def test_workers_give_the_table_one_decoder_gives(tmp_path, layout, gz):
    doc = _doc("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    got = _pass_in_a_fresh_process(_write(tmp_path, doc, layout, gz), 200_000)  # many chunks from a small file
    if default_workers() < 2:
        pytest.skip("one core: the pass does not start workers")
    assert len(got["ran"]) == 1 and got["ran"][0][0] > 5 and got["ran"][0][1]  # many chunks, all decoded
    assert got["rows"] == _counted(doc) > 1000


def test_a_cut_between_nested_objects_falls_back_to_one_decoder(tmp_path):
    doc = _doc("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    ops = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "Operator") and "Input Dims" in e.get("args", {})]
    assert len(ops) > 1000
    for e in ops[::20]:  # '}, {"' between objects nested in args: a fast cut there splits an event
        e["args"]["nested"] = [{"k": i} for i in range(300)]
    got = _pass_in_a_fresh_process(_write(tmp_path, doc, "compact", False), 20_000)
    if default_workers() < 2:
        pytest.skip("one core: the pass does not start workers")
    assert got["ran"] and got["ran"][0][1] is False  # a chunk did not decode: one decoder read the file
    assert got["rows"] == _counted(doc)


def test_a_bare_array_and_a_file_without_shapes(tmp_path, monkeypatch):
    doc = _doc("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc["traceEvents"]))
    monkeypatch.setattr(shapes, "CHUNK_BYTES", 200_000)
    assert len(shapes._parse(bare)) == _counted(doc)
    plain = [dict(e, args={k: v for k, v in (e.get("args") or {}).items() if k != "Input Dims"})
             for e in doc["traceEvents"]]
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"traceEvents": plain}))
    assert shapes._parse(none).empty


def test_every_op_gets_the_shapes_a_plain_json_read_gives_it():
    from perfkit.trace import load_trace

    path = shared_trace("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    first = {}
    for e in _doc(path.name)["traceEvents"]:
        if e.get("cat") in ("cpu_op", "Operator") and e.get("ph") == "X" and "Input Dims" in e.get("args", {}):
            first.setdefault((str(e["pid"]), str(e["tid"]), float(e["ts"]), e["name"]), e["args"]["Input Dims"])
    trace = load_trace(path)
    table = shapes.op_shapes(trace, use_cache=False)
    ops = trace.events.loc[table.index]
    keys = zip(ops["pid"].astype(str), ops["tid"].astype(str), ops["ts_us"], ops["name"].astype(str))
    assert [json.loads(d) for d in table["input_dims"]] == [first[k] for k in keys]
    ev = trace.events
    every_op = ev[(ev["cat"] == "cpu_op") & (ev["ph"] == "X")]
    wanted = {k for k in zip(every_op["pid"].astype(str), every_op["tid"].astype(str), every_op["ts_us"],
                             every_op["name"].astype(str))} & set(first)
    assert len(table) == sum(k in wanted for k in zip(every_op["pid"].astype(str), every_op["tid"].astype(str),
                                                      every_op["ts_us"], every_op["name"].astype(str))) > 1000
