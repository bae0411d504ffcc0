"""Decode a Perfetto protobuf trace with Perfetto's own schema (the compiled
perfetto_trace.proto shipped by the `perfetto` Python package) and print it
as JSON for tests/suite/trace_export.rs: every packet with every field set, by
Perfetto's field names, and every field the schema does not know.

Usage: python3 decode_perfetto.py TRACE_FILE
Exit 3 when the perfetto package (or protobuf) is missing.
"""

import json
import sys

try:
    from google.protobuf import unknown_fields
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2
except ImportError as e:
    print(f"cannot import Perfetto's schema: {e} (pip install perfetto)", file=sys.stderr)
    sys.exit(3)


def repeated(fd):
    # protobuf >= 5 says is_repeated; older versions only have the label.
    if hasattr(fd, "is_repeated"):
        return fd.is_repeated
    return fd.label == fd.LABEL_REPEATED


def unknown(msg, path, out):
    """Paths of fields the schema does not know (a wrong number or type)."""
    for f in unknown_fields.UnknownFieldSet(msg):
        out.append(f"{path}#{f.field_number}")
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if repeated(fd):
            for i, v in enumerate(value):
                unknown(v, f"{path}.{fd.name}[{i}]", out)
        else:
            unknown(value, f"{path}.{fd.name}", out)


def plain(msg):
    """The set fields of a message, by name; integers stay integers."""
    out = {}
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            out[fd.name] = [plain(v) for v in value] if repeated(fd) else plain(value)
        else:
            out[fd.name] = list(value) if repeated(fd) else value
    return out


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    trace = perfetto_trace_pb2.Trace()
    trace.ParseFromString(data)
    bad = []
    unknown(trace, "trace", bad)
    print(json.dumps({"packets": [plain(p) for p in trace.packet], "unknown_fields": bad}))


main()
