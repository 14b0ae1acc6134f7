"""zoo launch -H across real network stacks: two test hosts in network namespaces
(tests/testhosts.py, the session's ``test_hosts`` fixture), each with its own address,
sshd and folder, reached by address over ssh. The scheduler runs here, on a machine with several
interfaces (its own, the hosts' bridge and one no host can reach)."""
import csv
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import testhosts
from zoo import artifact
from zoo.data import embedded

from factories import pushpull_loop

from factories import ROOT
README_BASE = "/tmp/zoo-testhosts"     # docs/distributed.md's test-host folder, the fixture's here
NETWORK = "ssd_mobilenetv2_stride8"

# Linear regression by SGD for STEPS steps: as one process on the whole batch, or as worker
# R of W of a dist_sync cluster on rows [(step * W + R) * B, + B), its part of the step's
# W * B rows. Rank 0 saves the weights.
LINEAR = textwrap.dedent("""
    import sys
    import mxnet as mx
    import numpy as np
    from zoo.distributed.cluster import create_dist_kvstore
    data, batch, kind, output = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    x, y = np.load(data)["x"], np.load(data)["y"]
    kv = create_dist_kvstore(kind) if kind.startswith("dist") else None
    rank, workers = (kv.rank, kv.num_workers) if kv else (0, 1)
    w = mx.nd.zeros((x.shape[1],))
    if kv:
        kv.init(0, w)
    for step in range(3):
        start = (step * workers + rank) * batch
        xb, yb = mx.nd.array(x[start:start + batch]), mx.nd.array(y[start:start + batch])
        grad = mx.nd.dot(xb.T, mx.nd.dot(xb, w) - yb) * (2.0 / (batch * workers))
        if kv:
            kv.pushpull(0, grad, out=grad)
            grad.wait_to_read()   # MXNet 1.9.1's dist kvstore may hang on queued pushpulls
        w -= 0.05 * grad
    if rank == 0:
        np.save(output, w.asnumpy())
""")


def zoo_launch(hosts, *flags, host_file=None):
    """``zoo launch -H`` over the test hosts, its ssh configuration and short timeouts,
    as a started process (stdout and stderr piped, text)."""
    argv = [sys.executable, "-m", "zoo", "launch", "-H", host_file or hosts.host_file,
            "--ssh-config", hosts.ssh_config, "--host-timeout", "3", "--grace", "3", *flags]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(launch, timeout=240):
    """``(stdout, stderr)`` of a launch once it ends; killed if it outlives ``timeout``."""
    try:
        return launch.communicate(timeout=timeout)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()


def read_until(launch, done, timeout=240):
    """Read the launch's stdout until ``done(text so far)``; returns that text."""
    text, deadline = "", time.monotonic() + timeout
    for line in launch.stdout:
        text += line
        if done(text) or time.monotonic() > deadline:
            break
    assert done(text), text[-3000:]
    return text


def ranks(output):
    """``{rank: host}`` from the workers' announcements in the launch's output."""
    return {int(rank): host for host, rank in re.findall(
        r"\[worker \d+@([\d.]+)\] zoo: joined the cluster as worker rank (\d+)", output)}


def host_index(hosts, address):
    return hosts.addresses.index(address) + 1


def test_two_hosts_sum_gradients_like_one_process(test_hosts, tmp_path):
    rng = np.random.RandomState(0)
    x = rng.randn(24, 6).astype(np.float32)
    y = (x @ rng.randn(6).astype(np.float32) + 0.1 * rng.randn(24)).astype(np.float32)
    for path in [tmp_path] + [test_hosts.own_dir(i) for i in (1, 2)]:
        np.savez(os.path.join(str(path), "linear.npz"), x=x, y=y)
    # The data is each host's own copy: none at that path here.
    data = os.path.join(test_hosts.own, "linear.npz")
    assert not os.path.exists(data)
    launch = zoo_launch(test_hosts, "-n", "2", "-s", "1", "--", sys.executable, "-c", LINEAR,
                        data, "4", "dist_sync", os.path.join(test_hosts.own, "w.npy"))
    out, err = finish(launch)
    assert launch.returncode == 0, out[-3000:] + err[-3000:]
    # This machine has several interfaces; the scheduler took the one on the hosts' route.
    assert re.search(r"^zoo launch: started scheduler at %s:\d+ " % re.escape(
        test_hosts.gateway), err), err
    by_rank = ranks(out)
    assert sorted(by_rank) == [0, 1] and sorted(by_rank.values()) == test_hosts.addresses
    single = os.path.join(str(tmp_path), "w.npy")
    subprocess.run([sys.executable, "-c", LINEAR, os.path.join(str(tmp_path), "linear.npz"),
                    "8", "local", single], cwd=ROOT, check=True)
    distributed = np.load(os.path.join(test_hosts.own_dir(host_index(test_hosts,
                                                                      by_rank[0])), "w.npy"))
    # float32 sums in another order: equal within rtol 1e-5, atol 1e-6 (the weights are
    # ~0.1 to 0.6: one worker's half of the gradient alone would be off by tens of percent).
    assert np.abs(np.load(single)).max() > 0.1
    np.testing.assert_allclose(distributed, np.load(single), rtol=1e-5, atol=1e-6)
    rank1_host = test_hosts.own_dir(host_index(test_hosts, by_rank[1]))
    assert not os.path.exists(os.path.join(rank1_host, "w.npy"))


def readme_two_host_command(base):
    """docs/distributed.md's two-host ``zoo launch`` as an argv, with the test hosts under ``base``
    and ``zoo`` run as this Python's ``-m zoo`` (its virtualenv's)."""
    with open(os.path.join(ROOT, "docs", "distributed.md")) as stream:
        section = stream.read().split("<!-- the two-host example: tests/zoo/distributed/test_multihost.py -->",
                                      1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    command = section.split("$ zoo launch", 1)[1].split("\n$", 1)[0]
    argv = shlex.split("zoo launch" + command.replace("\\\n", " ").split("\n")[0])
    argv = [arg.replace(README_BASE, base) for arg in argv]
    zoo = [sys.executable, "-m", "zoo"]
    split = argv.index("--")
    assert argv[0] == argv[split + 1] == "zoo"
    return zoo + argv[1:split + 1] + zoo + argv[split + 2:]


def epoch_of(prefix):
    return artifact.latest_epoch(prefix) if os.path.exists(os.path.dirname(prefix)) else None


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_readme_two_host_training_survives_a_lost_host_and_resumes(test_hosts):
    """docs/distributed.md's example: each host trains on its own copy of the data and only rank 0
    writes checkpoints. Rank 0's host drops off the network during epoch 2: the launch ends
    naming it, epoch 1's checkpoint loads; copied to the other host, the run resumes."""
    shapes = embedded.generate(test_hosts.path("shapes"), seed=1, num_train=8, num_val=2,
                               image_size=128)
    for index in (1, 2):
        shutil.copytree(shapes, os.path.join(test_hosts.own_dir(index), "shapes"))
    argv = readme_two_host_command(test_hosts.base)
    assert "--epochs" in argv and argv[argv.index("--epochs") + 1] == "2"
    launch = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    # Host 2 runs worker 1 only (server 0 is on host 1): it is the one to lose.
    lost_host = test_hosts.address(2)
    try:
        by_rank = ranks(read_until(launch, lambda text: len(ranks(text)) == 2))
        index = host_index(test_hosts, by_rank[0])
        prefix = os.path.join(test_hosts.own_dir(index), "run", NETWORK)
        deadline = time.monotonic() + 120
        while epoch_of(prefix) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert epoch_of(prefix) == 1
        test_hosts.set_link(2, False)
        lost = time.monotonic()
        out, err = finish(launch, timeout=60)
    finally:
        test_hosts.set_link(2, True)
        test_hosts.kill_processes(2)
    assert launch.returncode == 1 and time.monotonic() - lost < 20
    lost_rank = 0 if by_rank[0] == lost_host else 1
    assert "zoo launch: error: worker 1@{0} (rank {1}): ssh to {0} failed or lost its " \
           "connection (exit 255): Timeout, server {0} not responding.".format(
               lost_host, lost_rank) in err, err
    assert err.count("zoo launch: error:") == 1
    # The last good checkpoint, written by rank 0 only, on its host only.
    assert artifact.load(prefix, 1).arg_params
    other = os.path.join(test_hosts.own_dir(3 - index), "run")
    assert sorted(os.listdir(other)) == ["worker-1.log"]
    # A full stop, then: the checkpoint copied to the other host, the same command resumes.
    for name in os.listdir(os.path.dirname(prefix)):
        if name.startswith(NETWORK):
            shutil.copy(os.path.join(os.path.dirname(prefix), name), other)
    resumed = subprocess.run(argv + ["--resume", "auto"], cwd=ROOT, capture_output=True,
                             text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert ranks(resumed.stdout)[0] == by_rank[0]
    assert artifact.latest_epoch(prefix) == 2 and artifact.load(prefix, 2).arg_params
    # The other host's copy was read, not written: it still ends at epoch 1.
    assert artifact.latest_epoch(os.path.join(other, NETWORK)) == 1
    with open(prefix + "-log.csv") as stream:
        assert [row["epoch"] for row in csv.DictReader(stream)] == ["1", "2"]


def test_killed_host_processes_end_the_launch_naming_host_and_rank(test_hosts):
    launch = zoo_launch(test_hosts, "-n", "2", "--", sys.executable, "-c", pushpull_loop())
    # Host 2 runs worker 1 only (server 0 is on host 1).
    address = test_hosts.address(2)
    try:
        text = read_until(launch, lambda text: len(ranks(text)) == 2 and "] summing" in text)
        rank = [r for r, host in ranks(text).items() if host == address][0]
        assert test_hosts.kill_processes(2)
        killed = time.monotonic()
        out, err = finish(launch, timeout=60)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
    assert launch.returncode == 1 and time.monotonic() - killed < 15
    # ssh's own last line: how OpenSSH's client says its session died depends on whether it
    # was reading or writing at that moment (seen in make test: the broken pipe, once).
    assert re.search(r"zoo launch: error: worker 1@{0} \(rank {1}\): ssh to {0} failed or lost "
                     r"its connection \(exit 255\): (Connection to {0} closed by remote host\."
                     r"|client_loop: send disconnect: Broken pipe)".format(
                         re.escape(address), rank), err), err
    assert err.count("zoo launch: error:") == 1


def test_unreachable_scheduler_fails_in_one_line_within_the_connect_timeout(test_hosts):
    start = time.monotonic()
    launch = zoo_launch(test_hosts, "-n", "2", "--scheduler-host", test_hosts.unreachable,
                        "--connect-timeout", "2", "--", sys.executable, "-c", pushpull_loop())
    out, err = finish(launch, timeout=120)
    assert launch.returncode == 1 and time.monotonic() - start < 120
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1, err
    assert re.match(r"zoo launch: error: worker \d@10\.231\.\d+\.1[12] found no cluster within "
                    r"--connect-timeout \(exit 75\): worker: error: no parameter-server cluster"
                    r" after 2 s: the scheduler at %s:\d+ did not answer" % re.escape(
                        test_hosts.unreachable), errors[0]), errors[0]


def test_host_missing_from_ssh_is_named_in_one_line(test_hosts, tmp_path):
    missing = test_hosts.address(9)    # on the hosts' subnet, but no host has it
    host_file = tmp_path / "hosts.txt"
    host_file.write_text("%s\n%s\n" % (test_hosts.address(1), missing))
    start = time.monotonic()
    launch = zoo_launch(test_hosts, "-n", "2", "--", "sleep", "60", host_file=str(host_file))
    out, err = finish(launch, timeout=60)
    assert launch.returncode == 1 and time.monotonic() - start < 30
    errors = [line for line in err.splitlines() if "error" in line]
    assert errors == ["zoo launch: error: worker 1@{0}: ssh to {0} failed or lost its "
                      "connection (exit 255): ssh: connect to host {0} port 22: No route to "
                      "host; stopped the other 3 process(es)".format(missing)], err


def interfaces_and_namespaces():
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout + \
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_test_hosts_are_removed_when_their_start_fails(test_hosts, tmp_path, monkeypatch):
    """Here an sshd that exits at once: the start fails in one line naming the host, and
    leaves no namespace, interface, process or key behind."""
    monkeypatch.setattr(testhosts, "SSHD", "/bin/false")
    hosts = testhosts.TestHosts(2, str(tmp_path))
    with pytest.raises(testhosts.TestHostsError, match=r"^sshd of test host 10\.231\.\d+\.11 "
                                                         r"did not start; see "):
        hosts.start()
    left = interfaces_and_namespaces()
    assert hosts.bridge not in left and hosts.other_link not in left
    assert not any(name in left for name in hosts.namespaces)
    assert sorted(os.listdir(str(tmp_path))) == ["host-1", "host-2", "own"]


def test_a_start_removes_what_killed_runs_left_and_nothing_else(test_hosts, tmp_path):
    """A run killed before its clean-up leaves namespaces and interfaces named after its
    process: the next start removes those of processes that no longer run (and the
    processes in them), and keeps those of running ones (here, this one's)."""
    ended = subprocess.Popen(["sleep", "0"])
    ended.wait()
    stale_namespace, stale_bridge = "zooth%xx0-1" % ended.pid, "zbr%xx0" % ended.pid
    kept = "zooth%xx99-1" % os.getpid()
    made = [["netns", "add", stale_namespace], ["link", "add", stale_bridge, "type", "bridge"],
            ["netns", "add", kept]]
    orphan = None
    try:
        for argv in made:
            subprocess.run(["ip"] + argv, check=True)
        orphan = subprocess.Popen(["ip", "netns", "exec", stale_namespace, "sleep", "120"])
        hosts = testhosts.TestHosts(1, str(tmp_path))
        with hosts:
            left = interfaces_and_namespaces()
        assert sorted(hosts.removed) == sorted([stale_namespace, stale_bridge])
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert stale_namespace not in left and stale_bridge not in left and kept in left
        assert hosts.namespaces[0] in left and hosts.namespaces[0] not in \
            interfaces_and_namespaces()
    finally:
        if orphan is not None:
            orphan.kill()
            orphan.wait()
        subprocess.run(["ip", "netns", "del", kept], capture_output=True)
        subprocess.run(["ip", "netns", "del", stale_namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", stale_bridge], capture_output=True)


@pytest.mark.slow
def test_readme_two_host_training_resumes_exactly(test_hosts):
    """Stopped after epoch 1, the checkpoint copied to the other host, and resumed: the same
    parameters and optimizer state as a straight run, bit for bit."""
    shapes = embedded.generate(test_hosts.path("exact-shapes"), seed=1, num_train=8,
                               num_val=2, image_size=128)
    for index in (1, 2):
        target = os.path.join(test_hosts.own_dir(index), "shapes")
        if not os.path.exists(target):
            shutil.copytree(shapes, target)
    argv = readme_two_host_command(test_hosts.base)
    runs = {}
    for name, epochs in (("straight", "2"), ("stopped", "1")):
        flags = list(argv)
        flags[flags.index("--epochs") + 1] = epochs
        flags[flags.index("--output-dir") + 1] = os.path.join(test_hosts.own, name)
        done = subprocess.run(flags, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs[name] = (flags, host_index(test_hosts, ranks(done.stdout)[0]))
    flags, index = runs["stopped"]
    stopped = os.path.join(test_hosts.own_dir(index), "stopped")
    for name in os.listdir(stopped):
        if name.startswith(NETWORK):
            shutil.copy(os.path.join(stopped, name),
                        os.path.join(test_hosts.own_dir(3 - index), "stopped"))
    flags[flags.index("--epochs") + 1] = "2"
    done = subprocess.run(flags + ["--resume", "auto"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    straight = artifact.load(os.path.join(test_hosts.own_dir(runs["straight"][1]), "straight",
                                          NETWORK), 2)
    resumed = artifact.load(os.path.join(stopped, NETWORK), 2)
    for a, b in ((straight.arg_params, resumed.arg_params),
                 (straight.aux_params, resumed.aux_params)):
        assert sorted(a) == sorted(b)
        for key in a:
            assert np.array_equal(a[key].asnumpy(), b[key].asnumpy()), key
