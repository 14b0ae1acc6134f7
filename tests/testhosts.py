"""Test hosts on this machine, for trying ``zoo launch -H`` across real network stacks.

Each test host is a Linux network namespace with its own interface (``eth0``, the inside end
of a veth pair) and address on a private subnet, ``10.231.N.0/24``, whose outside ends join a
bridge here at ``10.231.N.1``. Each runs its own sshd on port 22, reached by address with a
throwaway key, and its own mount namespace in which ``<base>/own`` is that host's folder
``<base>/host-I``: so every host reads its own copy of the data at the same path, as on
separate machines. A second interface here (``10.231.N+1.1``, on no host's route) gives this
machine several addresses, one of them unreachable from the hosts.

Nothing leaves the namespaces and interfaces created here: the subnet is one that no
interface or route of this machine uses, and the namespaces have no route beyond it.
:meth:`TestHosts.close` removes them all (processes, namespaces, interfaces, keys), also
after a failed start; what a killed process could not remove, the next start removes
(:func:`remove_leftovers`: the names carry the pid of the process that made them). Needs
root, ``ip`` (iproute2), ``unshare``, ``ssh``, ``ssh-keygen`` and ``sshd`` (Debian:
``apt-get install openssh-server``).

    with TestHosts(2, "/tmp/zoo-testhosts") as hosts:
        print(hosts.host_file, hosts.ssh_config)   # for zoo launch -H ... --ssh-config ...
"""
import argparse
import getpass
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from zoo.process import running

__all__ = ["TestHosts", "TestHostsError", "main", "missing_requirement"]

SUBNET_PREFIX = "10.231"
FIRST_HOST = 11                     # host I has address 10.231.N.(10 + I)
SSHD = "/usr/sbin/sshd"
TOOLS = ("ip", "unshare", "mount", "ssh", "ssh-keygen")
READY_SECONDS = 10.0
_INSTANCES = itertools.count()
# What an instance names: zooth<tag>-I (namespaces), zbr<tag> (bridge), zot<tag>[p] (the
# other interface), zv<tag>-I (the hosts' veths here); <tag> is <pid>x<instance>, in hex.
OWNED_NAME = re.compile(r"(?:zooth|zbr|zot|zv)([0-9a-f]+)x[0-9a-f]+(?:-\d+|p)?")
# sshd refuses to start without its privilege-separation folder (the package makes it at boot).
PRIVSEP_DIR = "/run/sshd"


class TestHostsError(RuntimeError):
    """The test hosts cannot be set up."""


def missing_requirement():
    """What this machine lacks to run test hosts, in a few words; None if nothing."""
    if os.geteuid() != 0:
        return "not root (network namespaces need root)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return "no %r command" % tool
    if not os.access(SSHD, os.X_OK):
        return "no %s (apt-get install openssh-server)" % SSHD
    return None


def run(argv, check=True):
    """Run a set-up command; a failure is a :class:`TestHostsError` with its message."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise TestHostsError("%s: %s" % (" ".join(argv), done.stderr.strip() or
                                          "exit code %d" % done.returncode))
    return done.stdout


def owner_pid(name):
    """The pid of the process whose :class:`TestHosts` named the namespace or interface
    ``name``, or None for a name it did not give."""
    match = OWNED_NAME.fullmatch(name)
    return int(match.group(1), 16) if match else None


def leftovers():
    """``(namespaces, interfaces)`` here named by :class:`TestHosts` of processes that no
    longer run (killed before their clean-up)."""
    namespaces = [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines()
                  if line.strip()]
    # "331: zv1f2x0-1@if330: <BROADCAST,...": the name, without its peer.
    interfaces = [line.split(":")[1].strip().split("@")[0]
                  for line in run(["ip", "-o", "link", "show"]).splitlines()]
    return tuple([name for name in names if ended(owner_pid(name))]
                 for names in (namespaces, interfaces))


def ended(pid):
    """Whether ``pid`` (None: not a test host's name) is a process that no longer runs."""
    return pid is not None and not running(pid)


def remove_leftovers():
    """Remove what :func:`leftovers` finds, the processes in those namespaces first; returns
    the names removed."""
    namespaces, interfaces = leftovers()
    for namespace in namespaces:
        kill_all(namespace)
        run(["ip", "netns", "del", namespace], check=False)
    for interface in interfaces:  # a veth may already be gone with its peer
        run(["ip", "link", "del", interface], check=False)
    return namespaces + interfaces


def kill_all(namespace):
    """SIGKILL every process in the network namespace ``namespace``."""
    sigkill(int(pid) for pid in run(["ip", "netns", "pids", namespace], check=False).split())


def sigkill(pids):
    """SIGKILL each of ``pids`` still running."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def used_subnets():
    """The third octets of 10.231.x.y that any address or route of this machine mentions."""
    text = run(["ip", "-4", "-o", "addr"]) + run(["ip", "-4", "route", "show", "table", "all"])
    return {int(word.split(".")[2]) for word in text.replace("/", " ").split()
            if word.startswith(SUBNET_PREFIX + ".") and word.count(".") == 3}


def free_subnet():
    """An even N such that neither 10.231.N.0/24 nor 10.231.N+1.0/24 is in use here."""
    used = used_subnets()
    for third in range(0, 255, 2):
        if third not in used and third + 1 not in used:
            return third
    raise TestHostsError("no free 10.231.N.0/24 subnet on this machine")


class TestHosts:
    """``count`` test hosts with their files under ``base``; see the module's doc."""

    def __init__(self, count, base):
        if count < 1:
            raise ValueError("need at least one test host, got %d" % count)
        self.count, self.base = count, os.path.abspath(base)
        # Names unique to this instance, short enough for interfaces (15 characters).
        self.tag = "%xx%x" % (os.getpid(), next(_INSTANCES))  # see OWNED_NAME
        self.bridge, self.other_link = "zbr" + self.tag, "zot" + self.tag
        self.namespaces = ["zooth%s-%d" % (self.tag, i) for i in range(1, count + 1)]
        self.sshds, self.started = [], []
        self.third = None
        self.removed = []  # leftovers of killed runs that start() removed

    # -- where things are ------------------------------------------------------------------
    def address(self, index):
        """Address of host ``index`` (1-based)."""
        return "%s.%d.%d" % (SUBNET_PREFIX, self.third, FIRST_HOST - 1 + index)

    @property
    def addresses(self):
        return [self.address(i) for i in range(1, self.count + 1)]

    @property
    def gateway(self):
        """This machine's address on the hosts' subnet (the bridge's)."""
        return "%s.%d.1" % (SUBNET_PREFIX, self.third)

    @property
    def unreachable(self):
        """An address of this machine that no test host can reach."""
        return "%s.%d.1" % (SUBNET_PREFIX, self.third + 1)

    def path(self, *parts):
        return os.path.join(self.base, *parts)

    @property
    def host_file(self):
        return self.path("hosts.txt")

    @property
    def ssh_config(self):
        return self.path("ssh_config")

    @property
    def own(self):
        """The path at which each host sees its own folder."""
        return self.path("own")

    def own_dir(self, index):
        """Host ``index``'s own folder, as seen from this machine."""
        return self.path("host-%d" % index)

    # -- start and stop --------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        """Create everything; on any failure remove what was made and raise."""
        try:
            self.removed = remove_leftovers()
            self.third = free_subnet()
            self._make_files()
            self._make_links()
            for index in range(1, self.count + 1):
                self._make_host(index)
            for index in range(1, self.count + 1):
                self._start_sshd(index)
            self._wait_for_sshds()
        except BaseException:
            self.close()
            raise
        return self

    def _make_files(self):
        os.makedirs(self.path("keys"), exist_ok=True)
        os.makedirs(self.own, exist_ok=True)
        for index in range(1, self.count + 1):
            os.makedirs(self.own_dir(index), exist_ok=True)
        for name in ("id_ed25519", "host_ed25519"):
            key = self.path("keys", name)
            for stale in (key, key + ".pub"):
                if os.path.exists(stale):
                    os.remove(stale)
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "zoo test host",
                 "-f", key])
        shutil.copyfile(self.path("keys", "id_ed25519.pub"),
                        self.path("keys", "authorized_keys"))
        with open(self.path("keys", "host_ed25519.pub")) as stream:
            host_key = " ".join(stream.read().split()[:2])
        write_file(self.path("keys", "known_hosts"), "%s %s\n" % (
            ",".join(self.addresses), host_key))
        write_file(self.ssh_config, self._client_config())
        write_file(self.host_file, "".join(a + "\n" for a in self.addresses))

    def _client_config(self):
        return "\n".join([
            "# ssh -F this file: the zoo's test hosts (tests/testhosts.py), by address",
            "Host %s.%d.*" % (SUBNET_PREFIX, self.third),
            "    User %s" % getpass.getuser(),
            "    IdentityFile %s" % self.path("keys", "id_ed25519"),
            "    IdentitiesOnly yes",
            "    UserKnownHostsFile %s" % self.path("keys", "known_hosts"),
            "    GlobalKnownHostsFile /dev/null",
            "    StrictHostKeyChecking yes", ""])

    def _sshd_config(self, index):
        return "\n".join([
            "ListenAddress %s" % self.address(index), "Port 22",
            "HostKey %s" % self.path("keys", "host_ed25519"),
            "AuthorizedKeysFile %s" % self.path("keys", "authorized_keys"),
            "PidFile none", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
            "PrintMotd no", "PrintLastLog no", ""])

    def _make_links(self):
        """The bridge to the hosts, and the other interface, here."""
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.started.append(("link", self.bridge))
        run(["ip", "addr", "add", self.gateway + "/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        run(["ip", "link", "add", self.other_link, "type", "veth", "peer", "name",
             self.other_link + "p"])
        self.started.append(("link", self.other_link))
        run(["ip", "addr", "add", self.unreachable + "/24", "dev", self.other_link])
        run(["ip", "link", "set", self.other_link, "up"])

    def _make_host(self, index):
        namespace, outside = self.namespaces[index - 1], "zv%s-%d" % (self.tag, index)
        run(["ip", "netns", "add", namespace])
        self.started.append(("netns", namespace))
        run(["ip", "link", "add", outside, "type", "veth", "peer", "name", outside + "i"])
        self.started.append(("link", outside))
        run(["ip", "link", "set", outside + "i", "netns", namespace])
        run(["ip", "-n", namespace, "link", "set", outside + "i", "name", "eth0"])
        run(["ip", "link", "set", outside, "master", self.bridge, "up"])
        run(["ip", "-n", namespace, "addr", "add", self.address(index) + "/24", "dev", "eth0"])
        run(["ip", "-n", namespace, "link", "set", "eth0", "up"])
        run(["ip", "-n", namespace, "link", "set", "lo", "up"])

    def _start_sshd(self, index):
        """sshd in the host's network namespace and its own mount namespace, where ``own``
        is the host's folder."""
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        config = self.path("keys", "sshd_config-%d" % index)
        write_file(config, self._sshd_config(index))
        script = "mount --bind %s %s && exec %s -D -e -f %s" % (
            self.own_dir(index), self.own, SSHD, config)
        with open(self.path("keys", "sshd-%d.log" % index), "ab") as log:
            self.sshds.append(subprocess.Popen(
                ["ip", "netns", "exec", self.namespaces[index - 1], "unshare", "--mount",
                 "--propagation", "private", "sh", "-c", script],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log))

    def _wait_for_sshds(self):
        deadline = time.monotonic() + READY_SECONDS
        for index, sshd in enumerate(self.sshds, 1):
            while not port_open(self.address(index), 22):
                if sshd.poll() is not None or time.monotonic() > deadline:
                    raise TestHostsError("sshd of test host %s did not start; see %s" % (
                        self.address(index), self.path("keys", "sshd-%d.log" % index)))
                time.sleep(0.05)

    # -- faults ----------------------------------------------------------------------------
    def set_link(self, index, up):
        """Bring host ``index``'s interface up or down (down: the host drops off the net)."""
        run(["ip", "-n", self.namespaces[index - 1], "link", "set", "eth0",
             "up" if up else "down"])

    def processes(self, index):
        """Pids of the processes in host ``index``'s network namespace, but its sshd."""
        pids = {int(pid) for pid in run(["ip", "netns", "pids",
                                         self.namespaces[index - 1]]).split()}
        return sorted(pids - {self.sshds[index - 1].pid})

    def kill_processes(self, index):
        """SIGKILL every process on host ``index`` but its sshd; returns their pids."""
        pids = self.processes(index)
        sigkill(pids)
        return pids

    def close(self):
        """Stop every process on the hosts, remove the namespaces, interfaces and keys."""
        for namespace in [name for kind, name in self.started if kind == "netns"]:
            kill_all(namespace)
        for sshd in self.sshds:
            sshd.wait()
        for kind, name in reversed(self.started):
            if kind == "netns":
                run(["ip", "netns", "del", name], check=False)
            else:
                run(["ip", "link", "del", name], check=False)
        self.sshds, self.started = [], []
        shutil.rmtree(self.path("keys"), ignore_errors=True)
        for name in (self.ssh_config, self.host_file):
            if os.path.exists(name):
                os.remove(name)


def port_open(address, port):
    """Whether something accepts TCP connections at ``address:port``."""
    try:
        socket.create_connection((address, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def write_file(path, text):
    """Write ``text`` to ``path`` atomically."""
    partial = path + ".partial"
    with open(partial, "w") as stream:
        stream.write(text)
    os.replace(partial, path)


def _stop(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    """``tools/testhosts.py``: start the test hosts, print how to use them, wait for Ctrl-C
    (or SIGTERM, SIGHUP), remove them; returns the exit status."""
    parser = argparse.ArgumentParser(prog="testhosts.py", description="Run test hosts on this "
                                     "machine until Ctrl-C (tools/testhosts.py).")
    parser.add_argument("count", type=int, nargs="?", default=2, help="test hosts (default 2)")
    parser.add_argument("base", nargs="?", default="/tmp/zoo-testhosts",
                        help="folder of the keys, host file and hosts' own folders")
    args = parser.parse_args(argv)
    missing = missing_requirement()
    if missing or args.count < 1:
        print("testhosts.py: error: %s" % (missing or "count must be >= 1"), file=sys.stderr)
        return 1
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    try:
        with TestHosts(args.count, args.base) as hosts:
            if hosts.removed:
                print("removed what killed runs left: %s" % ", ".join(hosts.removed))
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
