"""Distributed training on MXNet's parameter server (ps-lite): kvstore creation with a
connection timeout, and the pure parts of ``tools/launch.py`` (host files, free ports, the
environment each role needs, the ssh command line).

A ps-lite cluster is one scheduler, S servers and W workers. Every process reads its role
and the scheduler's address from ``DMLC_*`` variables; the scheduler assigns worker ranks
once all W workers and S servers have registered, so ``kv.rank`` is known only after
``mx.kv.create`` returns.
"""
import os
import re
import shlex
import socket
import sys
import threading
from collections import namedtuple

from zoo.process import SYNCHRONOUS_ENGINE, variable

__all__ = ["CLUSTER_VARIABLES", "CONNECT_TIMEOUT_EXIT_CODE", "CONNECT_TIMEOUT_VARIABLE",
           "ClusterError", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_HOST_TIMEOUT", "Node",
           "connect_timeout", "create_dist_kvstore", "forwarded_environment", "free_ports",
           "inherited_environment", "is_distributed", "is_synchronous", "label",
           "local_address_towards", "named_variables", "node_environment", "plan_nodes",
           "port_is_free", "read_host_file", "ssh_argv"]

CONNECT_TIMEOUT_VARIABLE = "ZOO_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 120.0
# A worker that gives up waiting for the cluster exits with this code (EX_TEMPFAIL).
CONNECT_TIMEOUT_EXIT_CODE = 75
# ssh's own exit code when it cannot connect or loses the connection.
SSH_FAILED_EXIT_CODE = 255
# Seconds a remote host may leave its ssh connection without answer before it counts as lost.
DEFAULT_HOST_TIMEOUT = 30.0
# A worker's line on joining the cluster: the launcher learns each worker's rank from it.
RANK_LINE = "zoo: joined the cluster as worker rank %d of %d"
RANK_PATTERN = re.compile(r"zoo: joined the cluster as worker rank (\d+) of \d+$")
# What every ps-lite process needs to find its cluster.
REQUIRED_VARIABLES = ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER",
                      "DMLC_NUM_WORKER")
# All ps-lite variables that describe a process's place in a cluster; only the launcher sets
# them. A stale DMLC_RANK would even stop ps-lite from taking the rank the scheduler assigns.
CLUSTER_VARIABLES = REQUIRED_VARIABLES + ("DMLC_NODE_HOST", "DMLC_INTERFACE", "DMLC_RANK",
                                          "PORT")
# Forwarded to remote hosts besides the cluster variables: settings of MXNet, ps-lite, OpenMP
# and the zoo. Paths and anything host-specific (PATH, HOME, ...) stay behind.
FORWARDED_PREFIXES = ("MXNET_", "PS_", "OMP_", "KMP_", "ZOO_")

Node = namedtuple("Node", "role index host")
Node.__doc__ = """One process of the cluster: ``role``, its launch ``index`` within the role
and ``host`` (None: this machine)."""


class ClusterError(RuntimeError):
    """A distributed kvstore cannot be created (no cluster environment)."""


def is_distributed(kvstore_kind):
    """Whether a kvstore type (``dist_sync``, ``local``, ...) runs on the parameter server."""
    return kvstore_kind.startswith("dist")


def is_synchronous(kvstore_kind):
    """Whether a distributed kvstore waits for every worker's gradient before replying."""
    return is_distributed(kvstore_kind) and "async" not in kvstore_kind


def connect_timeout():
    """Seconds a worker waits for the cluster: ``$ZOO_CONNECT_TIMEOUT``, else the default."""
    value = variable(CONNECT_TIMEOUT_VARIABLE)
    return DEFAULT_CONNECT_TIMEOUT if value is None else float(value)


def create_dist_kvstore(kind, timeout=None):
    """``mx.kv.create(kind)`` for a ``dist_*`` kind, bounded in time.

    ps-lite's start-up waits, without limit, until the scheduler has heard from every server
    and worker. A watchdog thread ends the process with a message and exit code
    ``CONNECT_TIMEOUT_EXIT_CODE`` if that takes longer than ``timeout`` seconds
    (default :func:`connect_timeout`): MXNet's C call cannot be interrupted otherwise.
    """
    missing = [name for name in REQUIRED_VARIABLES if name not in os.environ]
    if missing:
        raise ClusterError("kvstore %r needs a parameter-server cluster, but %s %s not set; "
                           "start the workers with tools/launch.py" % (
                               kind, ", ".join(missing), "is" if len(missing) == 1 else "are"))
    # Here, not at the top: the launcher and the command line's parsers use this module's
    # pure parts, and loading MXNet takes them seconds.
    import mxnet as mx
    timeout = connect_timeout() if timeout is None else timeout
    watchdog = threading.Timer(timeout, _give_up_joining, args=(timeout,))
    watchdog.daemon = True
    watchdog.start()
    try:
        kvstore = mx.kv.create(kind)
    finally:
        watchdog.cancel()
    print(RANK_LINE % (kvstore.rank, kvstore.num_workers), file=sys.stderr, flush=True)
    return kvstore


def announced_rank(line):
    """The rank a worker's output line announces (see :data:`RANK_LINE`), else None."""
    match = RANK_PATTERN.search(line)
    return int(match.group(1)) if match else None


def resolve(host):
    """The IPv4 address of ``host`` (a name or an address); OSError if there is none."""
    return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]


def _give_up_joining(timeout):
    """End this process, stuck in ps-lite's start-up, with one line saying why."""
    env = os.environ
    print("%s: error: no parameter-server cluster after %g s: the scheduler at %s:%s did not "
          "answer, or not all of its %s server(s) and %s worker(s) reached it (is it running, "
          "and reachable from this host?); the limit is --connect-timeout / $%s"
          % (env["DMLC_ROLE"], timeout, env["DMLC_PS_ROOT_URI"],
             env["DMLC_PS_ROOT_PORT"], env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"],
             CONNECT_TIMEOUT_VARIABLE), file=sys.stderr, flush=True)
    os._exit(CONNECT_TIMEOUT_EXIT_CODE)


def read_host_file(path):
    """Hosts of a host file: one ``host`` or ``user@host`` per line; blank lines and
    ``#`` comments are skipped."""
    hosts = []
    with open(path) as stream:
        for number, line in enumerate(stream, 1):
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            if len(entry.split()) != 1:
                raise ValueError("%s:%d: one host per line, got %r" % (path, number, entry))
            hosts.append(entry)
    if not hosts:
        raise ValueError("%s names no host" % path)
    return hosts


def plan_nodes(num_servers, num_workers, hosts=None):
    """The scheduler (on this machine), then servers and workers, each role spread
    round-robin over ``hosts`` (None: all on this machine)."""
    if num_servers < 1 or num_workers < 1:
        raise ValueError("need at least one server and one worker")
    nodes = [Node("scheduler", 0, None)]
    for role, count in (("server", num_servers), ("worker", num_workers)):
        nodes += [Node(role, i, hosts[i % len(hosts)] if hosts else None)
                  for i in range(count)]
    return nodes


def label(node):
    """``worker 1`` or ``worker 1@host``: how the launcher names a process."""
    name = "%s %d" % (node.role, node.index) if node.role != "scheduler" else node.role
    return name + ("@" + node.host if node.host else "")


def free_ports(count, host="127.0.0.1"):
    """``count`` distinct ports free on ``host``, ascending. All are held open until every
    one is picked, so none repeats; another program may still take one before it is used."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return sorted(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(host, port):
    """Whether a server may listen on ``host``:``port`` now: bound as ZeroMQ binds
    (``SO_REUSEADDR``, so a port a closed connection left in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def local_address_towards(host):
    """This machine's address on the route to ``host`` (``user@`` stripped): what the other
    hosts should use to reach a scheduler started here. Sends nothing (UDP connect)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host.rsplit("@", 1)[-1], 9))
        return sock.getsockname()[0]


def node_environment(node, scheduler_uri, scheduler_port, num_servers, num_workers,
                     node_host=None, node_port=None, interface=None):
    """The ps-lite variables of ``node``. ``node_host`` is the address it binds and announces
    (DMLC_NODE_HOST), ``interface`` the network interface to take it from otherwise;
    ``node_port`` its port (PORT; ps-lite picks another if that one is taken)."""
    env = {"DMLC_ROLE": node.role, "DMLC_PS_ROOT_URI": scheduler_uri,
           "DMLC_PS_ROOT_PORT": str(scheduler_port), "DMLC_NUM_SERVER": str(num_servers),
           "DMLC_NUM_WORKER": str(num_workers)}
    if node_host:
        env["DMLC_NODE_HOST"] = node_host
    if interface:
        env["DMLC_INTERFACE"] = interface
    if node_port:
        env["PORT"] = str(node_port)
    return env


def inherited_environment(environ):
    """``environ`` without the cluster variables a process must get from the launcher only,
    nor MXNet's synchronous engine, which ps-lite's asynchronous pushes cannot run on (the
    zoo chooses it for processes outside a cluster)."""
    return {k: v for k, v in environ.items() if k not in CLUSTER_VARIABLES
            and not (k == "MXNET_ENGINE_TYPE" and v == SYNCHRONOUS_ENGINE)}


def named_variables(environ, items):
    """``{NAME: VALUE}`` of ``NAME=VALUE`` items, and ``NAME``'s value in ``environ`` for a
    bare ``NAME`` (skipped if unset)."""
    named = {}
    for item in items:
        name, given, value = item.partition("=")
        if given:
            named[name] = value
        elif name in environ:
            named[name] = environ[name]
    return named


def forwarded_environment(environ, extra=()):
    """What crosses to a remote host: MXNet/ps-lite/OpenMP/zoo settings from ``environ``,
    plus the ``NAME`` or ``NAME=VALUE`` items of ``extra`` (see :func:`named_variables`)."""
    env = {k: v for k, v in inherited_environment(environ).items()
           if k.startswith(FORWARDED_PREFIXES)}
    env.update(named_variables(environ, extra))
    return env


def ssh_argv(host, command, env, cwd, ssh_port=None, connect_timeout_s=10, config=None,
             alive_timeout=None):
    """The ssh command line that runs ``command`` (a list) on ``host`` in folder ``cwd``
    with the variables ``env`` added to the remote login's environment; ``config`` is an
    ssh configuration file (``-F``).

    ``-tt`` gives the remote command a terminal, so it gets SIGHUP and ends when the
    connection closes (the launcher stops a remote process by stopping its ssh).
    ``BatchMode`` fails instead of asking for a password. With ``alive_timeout``, ssh
    ends (exit 255) once the host has not answered for about that many seconds: a host
    gone off the network would otherwise leave the other workers waiting forever.
    """
    assignments = " ".join(shlex.quote("%s=%s" % item) for item in sorted(env.items()))
    remote = "cd %s && exec env %s %s" % (shlex.quote(cwd), assignments,
                                          " ".join(shlex.quote(arg) for arg in command))
    argv = ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % connect_timeout_s]
    if alive_timeout:
        argv += ["-o", "ServerAliveInterval=%d" % max(1, round(alive_timeout / 3)),
                 "-o", "ServerAliveCountMax=3"]
    if config:
        argv += ["-F", config]
    if ssh_port:
        argv += ["-p", str(ssh_port)]
    return argv + [host, remote]
