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

from zoo.distributed.launcher import LaunchOptions, launch
from zoo.flags import add_flags

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    add_flags(p, LaunchOptions, "num_workers", "num_servers", "host_file", "scheduler_host",
              "port", "interface", "env", "connect_timeout", "grace", "python", "remote_dir",
              "ssh_port", "ssh_config", "host_timeout")
    # not "command": the top-level parser keeps the command's name under that one
    p.add_argument("worker_command", nargs=argparse.REMAINDER, metavar="command",
                   help="the worker command, after '--'")


def run(args):
    # argparse keeps the '--' that ends the launcher's own flags in the remainder
    command = args.worker_command
    command = command[1:] if command[:1] == ["--"] else command
    return launch(LaunchOptions.from_flags(args, command=tuple(command),
                                           env=tuple(args.env)))
