#!/usr/bin/env python
"""Run test hosts on this machine until Ctrl-C, for trying ``zoo launch -H`` by hand
(root only; see zoo/testhosts.py for what they are):

    sudo .venv/bin/python tools/testhosts.py 2 /tmp/zoo-testhosts

prints the host file and ssh configuration to give ``zoo launch``, then waits; Ctrl-C
(or SIGTERM, SIGHUP) removes the hosts, their interfaces and keys. The hosts' own folders
(BASE/host-I, seen on host I as BASE/own) and what was written there stay.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo.distributed.testhosts import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
