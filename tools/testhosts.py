#!/usr/bin/env python
"""Run test hosts on this machine until Ctrl-C, for trying ``zoo launch -H`` by hand
(root only; see zoo/testhosts.py for what they are):

    sudo .venv/bin/python tools/testhosts.py 2 /tmp/zoo-testhosts

prints the host file and ssh configuration to give ``zoo launch``, then waits; Ctrl-C
(or SIGTERM, SIGHUP) removes the hosts, their interfaces and keys. The hosts' own folders
(BASE/host-I, seen on host I as BASE/own) and what was written there stay.
"""
import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo.distributed.testhosts import TestHosts, TestHostsError, missing_requirement  # noqa: E402


def stop(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    parser = argparse.ArgumentParser(prog="testhosts.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("count", type=int, nargs="?", default=2, help="test hosts (default 2)")
    parser.add_argument("base", nargs="?", default="/tmp/zoo-testhosts",
                        help="folder of the keys, host file and hosts' own folders")
    args = parser.parse_args(argv)
    missing = missing_requirement()
    if missing or args.count < 1:
        print("testhosts.py: error: %s" % (missing or "count must be >= 1"), file=sys.stderr)
        return 1
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        with TestHosts(args.count, args.base) as hosts:
            print("test hosts %s up; zoo launch -H %s --ssh-config %s; on host I, %s is %s; "
                  "Ctrl-C removes them" % (", ".join(hosts.addresses), hosts.host_file,
                                           hosts.ssh_config, hosts.own,
                                           hosts.path("host-I")), flush=True)
            signal.pause()
    except TestHostsError as err:
        print("testhosts.py: error: %s" % err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("testhosts.py: removed the test hosts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
