#!/usr/bin/env python
"""Run a command on every worker of a parameter-server cluster, locally or over ssh.

The launcher starts a ps-lite scheduler, servers and workers (MXNet's kvstore dist_sync,
dist_device_sync or dist_async), each with its DMLC_* variables, on this machine or on the
hosts of a host file.

Two workers and one server on this machine:
    python tools/launch.py -n 2 -s 1 -- python tools/train.py --network ssd_mobilenetv2_stride8 \\
        --dataset voc --data-root output/shapes --kv-store dist_sync --batch-size 4 \\
        --output-dir output/dist --no-progress
Across hosts (one host or user@host per line; the scheduler runs here):
    python tools/launch.py -n 4 -s 2 -H hosts.txt -- python tools/train.py ... --kv-store dist_sync

Each process's output is prefixed with its role and index ("[worker 1] ..."). If any process
fails, the others are stopped and the launcher exits 1 naming it; Ctrl-C stops them all.
"""
import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple

from zoo import distributed

POLL_SECONDS = 0.1
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

Launched = namedtuple("Launched", "node popen")


class Interrupted(Exception):
    """The launcher got SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("-n", "--num-workers", type=int, default=1, help="worker processes")
    p.add_argument("-s", "--num-servers", type=int, default=1,
                   help="server processes (about one per host for large models)")
    p.add_argument("-H", "--host-file", default=None,
                   help="run servers and workers round-robin on these hosts over ssh "
                        "(unset: all on this machine, on 127.0.0.1)")
    p.add_argument("--scheduler-host", default=None,
                   help="address of this machine that every host can reach (unset: "
                        "127.0.0.1 locally, else the address on the route to the first host)")
    p.add_argument("--port", type=int, default=0, help="scheduler port (0: a free one)")
    p.add_argument("--interface", default=None,
                   help="network interface whose address remote servers and workers announce "
                        "(DMLC_INTERFACE; unset: ps-lite's first non-loopback one)")
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="also set or forward this variable (repeatable); over ssh only "
                        "MXNET_*, PS_*, OMP_*, KMP_* and ZOO_* are forwarded otherwise")
    p.add_argument("--connect-timeout", type=float, default=distributed.DEFAULT_CONNECT_TIMEOUT,
                   help="seconds a worker waits for the cluster to form before it fails "
                        "(passed as $%s)" % distributed.CONNECT_TIMEOUT_VARIABLE)
    p.add_argument("--grace", type=float, default=10.0,
                   help="seconds processes get to exit after SIGTERM, and servers after the "
                        "workers finish, before they are killed")
    p.add_argument("--python", default=sys.executable,
                   help="Python that runs the scheduler and servers (on every host)")
    p.add_argument("--remote-dir", default=os.getcwd(),
                   help="folder the command runs in on remote hosts")
    p.add_argument("--ssh-port", type=int, default=None,
                   help="port of sshd on the hosts (unset: ssh's own default)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="the worker command, after '--'")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("give the worker command after '--'")
    if args.num_workers < 1 or args.num_servers < 1:
        p.error("need at least one worker and one server")
    return args


def process_specs(args, environ=None, hosts=None):
    """``(node, argv, env)`` of every process to start, the scheduler first. Remote
    processes run through ssh, which itself gets this environment."""
    environ = dict(os.environ if environ is None else environ)
    nodes = distributed.plan_nodes(args.num_servers, args.num_workers, hosts)
    if hosts:
        uri = args.scheduler_host or distributed.local_address_towards(hosts[0])
        port = args.port or distributed.free_ports(1, uri)[0]
        node_ports = [None] * len(nodes)
    else:
        uri = args.scheduler_host or "127.0.0.1"
        # Ascending ports in launch order make ps-lite, which ranks the nodes of one host by
        # port, give "worker i" rank i.
        ports = distributed.free_ports(len(nodes), uri)
        port = args.port or ports[0]
        node_ports = [None] + ports[1:]
    timeout = {distributed.CONNECT_TIMEOUT_VARIABLE: "%g" % args.connect_timeout}
    specs = []
    for node, node_port in zip(nodes, node_ports):
        cluster = distributed.node_environment(
            node, uri, port, args.num_servers, args.num_workers,
            node_host=None if node.host else uri, node_port=node_port,
            interface=args.interface if node.host else None)
        argv = args.command if node.role == "worker" else [args.python, "-c", "import mxnet"]
        if node.host:
            env = dict(distributed.forwarded_environment(environ, args.env), **timeout,
                       **cluster)
            specs.append((node, distributed.ssh_argv(node.host, argv, env, args.remote_dir,
                                                     args.ssh_port), environ))
        else:
            env = dict(distributed.inherited_environment(environ),
                       **distributed.named_variables(environ, args.env), **timeout, **cluster)
            env.setdefault("OMP_NUM_THREADS", str(local_omp_threads(node, args.num_workers)))
            specs.append((node, argv, env))
    return specs


def local_omp_threads(node, num_workers):
    """OpenMP threads of a local process when the user set none: the local workers share
    this machine's cores; the scheduler and servers mostly wait on the network."""
    if node.role != "worker":
        return 1
    return max(1, len(os.sched_getaffinity(0)) // num_workers)


def _start_in_own_group():
    """In the child: its own process group (so stopping it stops its children too), and
    SIGTERM if the launcher dies without cleaning up."""
    os.setsid()
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(specs, launched):
    """Start every process, output piped, appending each to ``launched`` as it starts (so an
    interrupted start-up still stops those). No other thread may run yet (``preexec_fn``)."""
    for node, argv, env in specs:
        popen = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if node.host else
                                 subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, preexec_fn=_start_in_own_group)
        launched.append(Launched(node, popen))


def relay(stream, prefix, lock):
    """Copy ``stream`` line by line to stdout under ``prefix``; of a progress bar redrawn
    with carriage returns, only the last state."""
    for raw in iter(stream.readline, b""):
        parts = [part for part in raw.decode(errors="replace").rstrip("\r\n").split("\r")
                 if part.strip()]
        if parts:
            with lock:
                sys.stdout.write("[%s] %s\n" % (prefix, parts[-1]))
                sys.stdout.flush()
    stream.close()


def describe_exit(returncode):
    if returncode < 0:
        return "was killed by signal %d (%s)" % (-returncode, signal.Signals(-returncode).name)
    return "exited with code %d" % returncode


def supervise(launched, grace):
    """Wait for the workers; returns the failed processes' descriptions (empty: success).

    A non-zero exit of any process is a failure. Once every worker has exited 0, the
    servers and scheduler get ``grace`` seconds to finish on their own."""
    workers = [p for p in launched if p.node.role == "worker"]
    while True:
        failed = [p for p in launched if p.popen.poll() not in (None, 0)]
        if failed:
            return ["%s %s" % (distributed.label(p.node), describe_exit(p.popen.returncode))
                    for p in failed]
        if all(p.popen.returncode == 0 for p in workers):
            break
        time.sleep(POLL_SECONDS)
    deadline = time.monotonic() + grace
    while any(p.popen.poll() is None for p in launched) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    return ["%s %s" % (distributed.label(p.node), describe_exit(p.popen.returncode))
            for p in launched if p.popen.returncode not in (None, 0)]


def _signal_group(popen, signum):
    try:
        os.killpg(popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def stop(launched, grace):
    """SIGTERM every process group still running, SIGKILL what is left after ``grace``
    seconds; returns how many had to be stopped."""
    running = [p for p in launched if p.popen.poll() is None]
    for p in running:
        _signal_group(p.popen, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(p.popen.poll() is None for p in running) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    for p in running:
        # Only groups whose leader was never reaped: a reaped leader's pid may be reused.
        if p.popen.poll() is None:
            _signal_group(p.popen, signal.SIGKILL)
        p.popen.wait()
    return len(running)


HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _ignore_signals():
    """A second Ctrl-C must not cut the clean-up short (it is bounded by --grace)."""
    for signum in HANDLED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def run(specs, grace):
    """Start, relay and supervise the processes; returns the launcher's exit code."""
    launched, relays, lock = [], [], threading.Lock()
    try:
        start(specs, launched)
        for p in launched:
            relays.append(threading.Thread(target=relay, daemon=True, args=(
                p.popen.stdout, distributed.label(p.node), lock)))
            relays[-1].start()
        print("launch.py: started %s" % ", ".join(
            "%s (pid %d)" % (distributed.label(p.node), p.popen.pid) for p in launched),
            file=sys.stderr, flush=True)
        failures = supervise(launched, grace)
    except Interrupted as interrupted:
        _ignore_signals()
        stopped = stop(launched, grace)
        print("launch.py: %s: stopped %d process(es)" % (interrupted, stopped),
              file=sys.stderr, flush=True)
        return 128 + interrupted.signum
    _ignore_signals()
    stopped = stop(launched, grace)
    for thread in relays:
        thread.join(timeout=grace)
    if failures:
        print("launch.py: error: %s; stopped the other %d process(es)"
              % ("; ".join(failures), stopped), file=sys.stderr, flush=True)
        return 1
    if stopped:
        print("launch.py: warning: %d server/scheduler process(es) still ran %g s after the "
              "workers finished and were stopped" % (stopped, grace), file=sys.stderr)
    return 0


def main(argv=None):
    args = parse_args(argv)
    try:
        hosts = distributed.read_host_file(args.host_file) if args.host_file else None
    except (OSError, ValueError) as err:
        print("launch.py: error: %s" % err, file=sys.stderr)
        return 2
    specs = process_specs(args, hosts=hosts)
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in HANDLED_SIGNALS}
    try:
        return run(specs, args.grace)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
