#!/usr/bin/env python3
"""leftover_check.py - the test run leaves /dev/shm and the sm run
directory as it found them.

usage: leftover_check.py snapshot|check CCI_INFO FILE

snapshot  (the first test of a run) writes to FILE the leftovers of dead
          processes that are there before the run: shm regions
          /dev/shm/<pid>:<n>:<m> and sm directories /tmp/cci-sm-<uid>/<pid>,
          as `cci_info --leftovers --json` lists them.
check     (the last test) lists them again and fails, naming each, when
          one is there that was not in FILE: a test killed a process (or
          one crashed) and nothing removed what it left.  Without FILE
          (the check run alone) every leftover counts.

Entries of running processes are not leftovers: other programs and other
test runs on this host keep theirs (cci_info judges owners by pid and
start time, and by whether they hold the entry).  Nothing is removed here:
the check reports, the suites clean (tests/common/shm_sweep.h and the
plugins' own sweep at endpoint creation).  A process of another run on
this host that dies during this run without cleaning up is counted too:
its pid and path are printed, so it can be told apart.
"""
import json
import os
import subprocess
import sys


def leftovers(cci_info):
    """{path: entry} of dead processes' leftovers, or None if cci_info failed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCI_")}
    env["CCI_CTP"] = "sm"  # only the default places; no plugin but sm to load
    p = subprocess.run([cci_info, "--leftovers", "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        print("cci_info --leftovers --json failed (exit %d):\n%s" % (p.returncode, p.stderr))
        return None
    return {x["path"]: x for x in json.loads(p.stdout)["leftovers"] if x["owner"] == "gone"}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("snapshot", "check"):
        print(__doc__)
        return 2
    mode, cci_info, path = sys.argv[1:]
    now = leftovers(cci_info)
    if now is None:
        return 1
    if mode == "snapshot":
        with open(path + ".tmp", "w") as f:
            json.dump(sorted(now), f)
        os.replace(path + ".tmp", path)
        print("%d leftovers of dead processes before the run%s" %
              (len(now), "".join("\n  " + p for p in sorted(now))))
        return 0
    try:
        with open(path) as f:
            before = set(json.load(f))
    except FileNotFoundError:
        print("no snapshot %s (the first test did not run): every leftover counts" % path)
        before = set()
    new = sorted(p for p in now if p not in before)
    for p in new:
        x = now[p]
        print("LEFT BEHIND: %s (%s, %d bytes, pid %d, gone)" % (p, x["kind"], x["bytes"],
                                                                 x["pid"]))
    print("%d leftovers of dead processes before the run, %d now, %d new" %
          (len(before), len(now), len(new)))
    if new:
        print("FAIL: the run left %d behind; a test that kills processes must sweep "
              "(tests/common/shm_sweep.h)" % len(new))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
