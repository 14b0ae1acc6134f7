"""``zoo launch``: run a command on every worker of a parameter-server cluster (a ps-lite
scheduler, servers and workers), on this machine or over ssh (see :mod:`zoo.distributed.launcher`).

Two workers and one server on this machine:
    zoo launch -n 2 -s 1 -- zoo train --network ssd_mobilenetv2_stride8 --dataset voc \\
        --data-root output/shapes --kv-store dist_sync --batch-size 4 --no-progress
Across hosts (one host or user@host per line; the scheduler runs here), e.g. the test hosts
of tools/testhosts.py:
    zoo launch -n 4 -s 2 -H hosts.txt -- zoo train ... --kv-store dist_sync
    zoo launch -n 2 -H /tmp/zoo-testhosts/hosts.txt --ssh-config /tmp/zoo-testhosts/ssh_config \\
        -- zoo train ... --kv-store dist_sync
"""
import argparse

from zoo.distributed.cluster import CONNECT_TIMEOUT_VARIABLE
from zoo.distributed.launcher import LaunchOptions, launch
from zoo.cli.common import (field_default, nonnegative_float, nonnegative_int, options_from,
                            positive_float, positive_int)

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("-n", "--num-workers", type=positive_int, default=LaunchOptions.num_workers,
                   help="worker processes")
    p.add_argument("-s", "--num-servers", type=positive_int, default=LaunchOptions.num_servers,
                   help="server processes (about one per host for large models)")
    p.add_argument("-H", "--host-file", default=LaunchOptions.host_file,
                   help="run servers and workers round-robin on these hosts over ssh "
                        "(unset: all on this machine, on 127.0.0.1)")
    p.add_argument("--scheduler-host", default=LaunchOptions.scheduler_host,
                   help="address of this machine that every host can reach (unset: "
                        "127.0.0.1 locally, else the address on the route to the first host)")
    p.add_argument("--port", type=nonnegative_int, default=LaunchOptions.port,
                   help="scheduler port (0: a free one)")
    p.add_argument("--interface", default=LaunchOptions.interface,
                   help="network interface whose address remote servers and workers announce "
                        "(DMLC_INTERFACE; unset: ps-lite's first non-loopback one)")
    # a list: "append" appends to (a copy of) its default
    p.add_argument("--env", action="append", default=list(LaunchOptions.env),
                   metavar="NAME[=VALUE]",
                   help="also set or forward this variable (repeatable); over ssh only "
                        "MXNET_*, PS_*, OMP_*, KMP_* and ZOO_* are forwarded otherwise")
    p.add_argument("--connect-timeout", type=positive_float,
                   default=LaunchOptions.connect_timeout,
                   help="seconds a worker waits for the cluster to form before it fails "
                        "(passed as $%s)" % CONNECT_TIMEOUT_VARIABLE)
    p.add_argument("--grace", type=nonnegative_float, default=LaunchOptions.grace,
                   help="seconds processes get to exit after SIGTERM, and servers after the "
                        "workers finish, before they are killed")
    p.add_argument("--python", default=LaunchOptions.python,
                   help="Python that runs the scheduler and servers (on every host)")
    p.add_argument("--remote-dir", default=field_default(LaunchOptions, "remote_dir"),
                   help="folder the command runs in on remote hosts")
    p.add_argument("--ssh-port", type=positive_int, default=LaunchOptions.ssh_port,
                   help="port of sshd on the hosts (unset: ssh's own default)")
    p.add_argument("--ssh-config", default=LaunchOptions.ssh_config, metavar="FILE",
                   help="ssh configuration file for the hosts (ssh -F; unset: ssh's own)")
    p.add_argument("--host-timeout", type=positive_float, default=LaunchOptions.host_timeout,
                   help="seconds a host may leave its ssh connection unanswered before it "
                        "counts as lost and the launch fails")
    # not "command": the top-level parser keeps the command's name under that one
    p.add_argument("worker_command", nargs=argparse.REMAINDER, metavar="command",
                   help="the worker command, after '--'")


def run(args):
    # argparse keeps the '--' that ends the launcher's own flags in the remainder
    command = args.worker_command
    command = command[1:] if command[:1] == ["--"] else command
    return launch(options_from(LaunchOptions, args, command=tuple(command),
                               env=tuple(args.env)))
