#!/usr/bin/env python
"""Run test hosts on this machine until Ctrl-C, for trying ``zoo launch -H`` by hand
(root only; see tests/testhosts.py for what they are):

    sudo .venv/bin/python tools/testhosts.py 2 /tmp/zoo-testhosts

prints the host file and ssh configuration to give ``zoo launch``, then waits; Ctrl-C
(or SIGTERM, SIGHUP) removes the hosts, their interfaces and keys. The hosts' own folders
(BASE/host-I, seen on host I as BASE/own) and what was written there stay.
"""
import os
import sys

# The test hosts are test code, not installed with the zoo: tests/ of this checkout.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
from testhosts import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
