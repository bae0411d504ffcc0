"""scripts/vm/serial_log.py: what the checkers of scripts/vm-test share in reading
the guest's serial log: the text after a line prefix, a gzip + base64 block
between "@@@ NAME begin" and "@@@ NAME end" lines, and the list of checks
each checker prints and fails on."""

import base64
import gzip


def lines_of(log, prefix):
    """What follows `prefix` on each line holding it (the guest's first line
    can follow the firmware's terminal codes)."""
    return [line[line.index(prefix) + len(prefix) :] for line in log if prefix in line]


def one(log, prefix):
    found = lines_of(log, prefix)
    return found[0] if found else None


def gz_block(log, name):
    """The bytes of the block `name` (None when the log lacks it)."""
    begin, end = f"@@@ {name} begin", f"@@@ {name} end"
    if begin not in log or end not in log:
        return None
    inner = log[log.index(begin) + 1 : log.index(end)]
    return gzip.decompress(base64.b64decode("".join(inner)))


class Checks:
    def __init__(self):
        self.failed = []

    def check(self, name, ok, saw):
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {saw}")
        if not ok:
            self.failed.append(name)
