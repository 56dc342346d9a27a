"""The op-shapes pass (perfkit.trace.shapes): chunks decoded by forked workers give the table one
decoder gives, in every layout; a chunk cut between objects nested in args falls back to one decoder; the rows are
those a plain json read counts."""
import gzip
import json

import pandas as pd
import pytest

from perfkit.trace import shapes
from perfkit.trace.workers import will_fork

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


def _serial(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(shapes, "will_fork", lambda: False)
        return shapes._parse(path)


def _counted(doc: dict) -> int:
    return sum(1 for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "operator", "Operator")
               and e.get("ph") == "X" and "Input Dims" in (e.get("args") or {}) and isinstance(e.get("ts"), (int, float)))


@pytest.mark.skipif(not will_fork(), reason="the workers are forked; this process cannot fork safely")
@pytest.mark.parametrize("layout,gz", [("pretty", True), ("lines", False), ("compact", False)])
def test_workers_give_the_table_one_decoder_gives(tmp_path, monkeypatch, layout, gz):
    doc = _doc("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    path = _write(tmp_path, doc, layout, gz)
    monkeypatch.setattr(shapes, "CHUNK_BYTES", 200_000)  # many chunks from a small file
    ran = []
    parallel = shapes._parallel
    monkeypatch.setattr(shapes, "_parallel", lambda text, spans: ran.append(len(spans)) or parallel(text, spans))
    table = shapes._parse(path)
    assert ran and ran[0] > 5
    assert len(table) == _counted(doc) > 1000
    pd.testing.assert_frame_equal(table, _serial(path, monkeypatch), check_exact=True)


@pytest.mark.skipif(not will_fork(), reason="the workers are forked; this process cannot fork safely")
def test_a_cut_between_nested_objects_falls_back_to_one_decoder(tmp_path, monkeypatch):
    doc = _doc("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz")
    ops = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "Operator") and "Input Dims" in e.get("args", {})]
    assert len(ops) > 1000
    for e in ops[::20]:  # '}, {"' between objects nested in args: a fast cut there splits an event
        e["args"]["nested"] = [{"k": i} for i in range(300)]
    path = _write(tmp_path, doc, "compact", False)
    monkeypatch.setattr(shapes, "CHUNK_BYTES", 20_000)
    failed = []
    parallel = shapes._parallel
    monkeypatch.setattr(shapes, "_parallel", lambda text, spans: failed.append(r := parallel(text, spans)) or r)
    table = shapes._parse(path)
    assert failed == [None]  # some chunk did not decode: the whole file went through one decoder
    assert len(table) == _counted(doc)
    pd.testing.assert_frame_equal(table, _serial(path, monkeypatch), check_exact=True)


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
