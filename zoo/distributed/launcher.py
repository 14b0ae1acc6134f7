"""Run a command on every worker of a parameter-server cluster, locally or over ssh: the
process side of ``zoo launch`` (the pure parts, host files, ports and environments, are in
:mod:`zoo.distributed.cluster`).

The launcher starts a ps-lite scheduler, servers and workers (MXNet's kvstore dist_sync,
dist_device_sync or dist_async), each with its DMLC_* variables, on this machine or on the
hosts of a host file. Each process's output is prefixed with its role and index
("[worker 1] ..."). If any process fails, the others are stopped and the launch ends with 1
naming it; SIGINT, SIGTERM or SIGHUP stop them all.
"""
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from zoo.distributed import cluster as distributed
from zoo.errors import OptionsError
from zoo.flags import (REQUIRED, flag, nonnegative_float, nonnegative_int, options_from,
                       positive_float, positive_int)
from zoo.process import users_environment

__all__ = ["LaunchOptions", "launch", "process_specs", "read_hosts", "run", "say", "start", "stop"]

PROGRAM = "zoo launch"
POLL_SECONDS = 0.1
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SSH_CLOSED = re.compile(r"Connection to \S+ closed\.$")


@dataclass(frozen=True)
class LaunchOptions:
    """What ``zoo launch`` starts, and where: each field but ``command`` (the words after
    ``--``) declares its flag (:mod:`zoo.flags`)."""
    command: Tuple[str, ...]             # run on every worker
    num_workers: int = flag(1, "worker processes", name=("-n", "--num-workers"),
                            type=positive_int)
    num_servers: int = flag(1, "server processes (about one per host for large models)",
                            name=("-s", "--num-servers"), type=positive_int)
    host_file: Optional[str] = flag(     # None: every process on this machine (127.0.0.1)
        None, "run servers and workers round-robin on these hosts over ssh (unset: all on "
              "this machine, on 127.0.0.1)", name=("-H", "--host-file"))
    scheduler_host: Optional[str] = flag(  # None: 127.0.0.1, or the address towards host 1
        None, "address of this machine that every host can reach (unset: 127.0.0.1 locally, "
              "else the address on the route to the first host)")
    port: int = flag(0, "scheduler port (0: a free one)", type=nonnegative_int)
    interface: Optional[str] = flag(     # DMLC_INTERFACE of remote processes
        None, "network interface whose address remote servers and workers announce "
              "(DMLC_INTERFACE; unset: ps-lite's first non-loopback one)")
    env: Tuple[str, ...] = flag(         # NAME or NAME=VALUE also set or forwarded
        (), "also set or forward this variable (repeatable); over ssh only MXNET_*, PS_*, "
            "OMP_*, KMP_* and ZOO_* are forwarded otherwise", action="append",
        metavar="NAME[=VALUE]")
    connect_timeout: float = flag(
        distributed.DEFAULT_CONNECT_TIMEOUT, "seconds a worker waits for the cluster to form "
        "before it fails (passed as $%s)" % distributed.CONNECT_TIMEOUT_VARIABLE,
        type=positive_float)
    grace: float = flag(10.0, "seconds processes get to exit after SIGTERM, and servers after "
                              "the workers finish, before they are killed",
                        type=nonnegative_float)
    python: str = flag(sys.executable, "Python that runs the scheduler and servers (on every "
                                       "host)")
    remote_dir: str = flag(REQUIRED, "folder the command runs in on remote hosts",
                           default_factory=os.getcwd)
    ssh_port: Optional[int] = flag(None, "port of sshd on the hosts (unset: ssh's own default)",
                                   type=positive_int)
    ssh_config: Optional[str] = flag(    # ssh -F: keys, users and known hosts of the hosts
        None, "ssh configuration file for the hosts (ssh -F; unset: ssh's own)", metavar="FILE")
    host_timeout: float = flag(          # silent ssh connection: host lost
        distributed.DEFAULT_HOST_TIMEOUT, "seconds a host may leave its ssh connection "
        "unanswered before it counts as lost and the launch fails", type=positive_float)

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo launch``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)

    def __post_init__(self):
        if not self.command:
            raise OptionsError("give the worker command after '--'")
        if self.num_workers < 1 or self.num_servers < 1:
            raise OptionsError("need at least one worker and one server")


@dataclass(frozen=True)
class ProcessSpec:
    """One process to start: its ``node``, command line and environment."""
    node: distributed.Node
    argv: List[str]
    env: Dict[str, str]


class Output:
    """What the launcher keeps of one process's output: its last line, and the rank a
    worker announced on joining the cluster (None: none yet)."""

    def __init__(self):
        self.last_line, self.rank = "", None

    def note(self, line):
        # ssh -tt ends with this notice, after the line that says why
        if not SSH_CLOSED.match(line):
            self.last_line = line
        rank = distributed.announced_rank(line)
        if rank is not None:
            self.rank = rank


@dataclass(frozen=True)
class Launched:
    node: distributed.Node
    popen: subprocess.Popen
    output: Output = field(default_factory=Output)


class Interrupted(Exception):
    """The launcher got SIGINT, SIGTERM or SIGHUP."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def say(message):
    """One line of the launcher's own on stderr (its processes' output goes to stdout)."""
    print("%s: %s" % (PROGRAM, message), file=sys.stderr, flush=True)


def read_hosts(path):
    """The host file's hosts; an unreadable or malformed file is an :class:`OptionsError`."""
    try:
        return distributed.read_host_file(path)
    except (OSError, ValueError) as err:
        raise OptionsError("host file: %s" % err) from None


def scheduler_address(options, hosts):
    """The scheduler's IPv4 address: ``--scheduler-host`` resolved (ZeroMQ takes no host
    names, apache/mxnet#12062), else this machine's address on the route to the first host
    (whatever interface that is), else 127.0.0.1."""
    try:
        if options.scheduler_host:
            return distributed.resolve(options.scheduler_host)
        return distributed.local_address_towards(hosts[0]) if hosts else "127.0.0.1"
    except OSError as err:
        raise OptionsError("%s: %s" % ("--scheduler-host %s" % options.scheduler_host
                                       if options.scheduler_host else
                                       "no route to the first host %s" % hosts[0], err)) \
            from None


def process_specs(options, environ=None, hosts=None):
    """The :class:`ProcessSpec` of every process to start, the scheduler first. Remote
    processes run through ssh, which itself gets this environment. ``environ`` defaults to
    this process's, less what the zoo chose in it (the cores are shared out here)."""
    environ = users_environment() if environ is None else dict(environ)
    nodes = distributed.plan_nodes(options.num_servers, options.num_workers, hosts)
    uri = scheduler_address(options, hosts)
    if hosts:
        port = options.port or distributed.free_ports(1, uri)[0]
        node_ports = [None] * len(nodes)
    else:
        # Ascending ports in launch order make ps-lite, which ranks the nodes of one host by
        # port, give "worker i" rank i.
        ports = distributed.free_ports(len(nodes), uri)
        port = options.port or ports[0]
        node_ports = [None] + ports[1:]
    timeout = {distributed.CONNECT_TIMEOUT_VARIABLE: "%g" % options.connect_timeout}
    specs = []
    for node, node_port in zip(nodes, node_ports):
        cluster = distributed.node_environment(
            node, uri, port, options.num_servers, options.num_workers,
            node_host=None if node.host else uri, node_port=node_port,
            interface=options.interface if node.host else None)
        argv = (list(options.command) if node.role == "worker"
                else [options.python, "-c", "import mxnet"])
        if node.host:
            env = dict(distributed.forwarded_environment(environ, options.env), **timeout,
                       **cluster)
            specs.append(ProcessSpec(node, distributed.ssh_argv(
                node.host, argv, env, options.remote_dir, options.ssh_port,
                config=options.ssh_config, alive_timeout=options.host_timeout), environ))
        else:
            env = dict(distributed.inherited_environment(environ),
                       **distributed.named_variables(environ, options.env), **timeout,
                       **cluster)
            env.setdefault("OMP_NUM_THREADS", str(local_omp_threads(node, options.num_workers)))
            specs.append(ProcessSpec(node, argv, env))
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
    for spec in specs:
        popen = subprocess.Popen(spec.argv, env=spec.env, stdin=subprocess.PIPE
                                 if spec.node.host else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 preexec_fn=_start_in_own_group)
        launched.append(Launched(spec.node, popen))


def relay(stream, prefix, lock, output):
    """Copy ``stream`` line by line to stdout under ``prefix``, noting each line in
    ``output`` (an :class:`Output`); of a progress bar redrawn with carriage returns, only
    the last state."""
    for raw in iter(stream.readline, b""):
        parts = [part for part in raw.decode(errors="replace").rstrip("\r\n").split("\r")
                 if part.strip()]
        if parts:
            output.note(parts[-1])
            with lock:
                sys.stdout.write("[%s] %s\n" % (prefix, parts[-1]))
                sys.stdout.flush()
    stream.close()


def describe_exit(returncode):
    if returncode < 0:
        return "was killed by signal %d (%s)" % (-returncode, signal.Signals(-returncode).name)
    return "exited with code %d" % returncode


def describe_failure(launched):
    """One clause on a failed process: its label, rank (once announced) and host, and for
    a lost ssh connection or a cluster that never formed, its last line of output."""
    name = distributed.label(launched.node)
    if launched.output.rank is not None:
        name += " (rank %d)" % launched.output.rank
    code, last = launched.popen.returncode, launched.output.last_line
    if launched.node.host and code == distributed.SSH_FAILED_EXIT_CODE:
        return "%s: ssh to %s failed or lost its connection (exit %d): %s" % (
            name, launched.node.host, code, last or "no message")
    if code == distributed.CONNECT_TIMEOUT_EXIT_CODE:
        return "%s found no cluster within --connect-timeout (exit %d): %s" % (
            name, code, last)
    return "%s %s" % (name, describe_exit(code))


def _failures(launched):
    return [p for p in launched if p.popen.returncode not in (None, 0)]


def supervise(launched, grace):
    """Wait for the workers; returns the failed processes (empty: success).

    A non-zero exit of any process is a failure. Once every worker has exited 0, the
    servers and scheduler get ``grace`` seconds to finish on their own."""
    workers = [p for p in launched if p.node.role == "worker"]
    while True:
        if any(p.popen.poll() not in (None, 0) for p in launched):
            return _failures(launched)
        if all(p.popen.returncode == 0 for p in workers):
            break
        time.sleep(POLL_SECONDS)
    deadline = time.monotonic() + grace
    while any(p.popen.poll() is None for p in launched) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    return _failures(launched)


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


def started_line(scheduler, launched):
    """``scheduler at ADDRESS:PORT (pid N), server 0@HOST (pid M), ...``"""
    where = "scheduler at %s:%s" % (scheduler.env["DMLC_PS_ROOT_URI"],
                                     scheduler.env["DMLC_PS_ROOT_PORT"])
    return ", ".join("%s (pid %d)" % (where if p.node.role == "scheduler" else
                                      distributed.label(p.node), p.popen.pid)
                     for p in launched)


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _ignore_signals():
    """A second Ctrl-C must not cut the clean-up short (it is bounded by the grace time)."""
    for signum in HANDLED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def run(specs, grace):
    """Start, relay and supervise the processes; returns the launcher's exit code."""
    launched, relays, lock = [], [], threading.Lock()
    try:
        start(specs, launched)
        for p in launched:
            relays.append(threading.Thread(target=relay, daemon=True, args=(
                p.popen.stdout, distributed.label(p.node), lock, p.output)))
            relays[-1].start()
        say("started %s" % started_line(specs[0], launched))
        failures = supervise(launched, grace)
    except Interrupted as interrupted:
        _ignore_signals()
        say("%s: stopped %d process(es)" % (interrupted, stop(launched, grace)))
        return 128 + interrupted.signum
    _ignore_signals()
    stopped = stop(launched, grace)
    for thread in relays:
        thread.join(timeout=grace)
    if failures:
        # Described once their output has been read to the end: the last line says why.
        say("error: %s; stopped the other %d process(es)" % (
            "; ".join(describe_failure(p) for p in failures), stopped))
        return 1
    if stopped:
        say("warning: %d server/scheduler process(es) still ran %g s after the workers "
            "finished and were stopped" % (stopped, grace))
    return 0


def check_scheduler_address(address, port=0):
    """Refuse a scheduler address that is not this machine's (the scheduler runs here), and
    a ``port`` the scheduler could not listen on there: ps-lite would fail only once every
    process has started, in a traceback that names neither."""
    try:
        distributed.free_ports(1, address)
    except OSError as err:
        raise OptionsError("--scheduler-host %s: not an address of this machine, where the "
                           "scheduler runs (%s)" % (address, err.strerror)) from None
    if port and not distributed.port_is_free(address, port):
        raise OptionsError("--port %d: in use on %s, where the scheduler listens: give a free "
                           "port, or 0 for any" % (port, address))


def check_ssh_config(path):
    """Refuse an ``--ssh-config`` that is not a readable file: ssh reads a folder as an
    empty configuration, and its failure then never names it."""
    try:
        with open(path, "rb") as stream:
            stream.read(1)
    except OSError as err:
        raise OptionsError("--ssh-config %s: not a readable ssh configuration file (%s)"
                           % (path, err.strerror or err)) from None


def launch(options, environ=None):
    """Run ``options.command`` on every worker of a new cluster until the workers end;
    returns the exit code: 0, 1 if any process failed, 128 + N after signal N. Call it from
    the main thread (it handles SIGINT, SIGTERM and SIGHUP meanwhile)."""
    hosts = read_hosts(options.host_file) if options.host_file else None
    if options.ssh_config is not None:
        check_ssh_config(options.ssh_config)
    check_scheduler_address(scheduler_address(options, hosts), options.port)
    specs = process_specs(options, environ=environ, hosts=hosts)
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in HANDLED_SIGNALS}
    try:
        return run(specs, options.grace)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
