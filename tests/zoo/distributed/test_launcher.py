"""zoo launch (zoo.distributed.launcher, tools/launch.py) and distributed training (kvstore
dist_sync), on loopback only: every cluster here is a scheduler, servers and workers on 127.0.0.1 at
free ports."""
import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import mxnet as mx
import numpy as np
import pytest

import zoo.cli
from zoo import artifact, process
from zoo.distributed import cluster as distributed
from zoo.distributed import launcher
from zoo.cli import launch as launch_command
from zoo.cli import train as train_command
from zoo.data import embedded
from zoo.engine.hooks import Validation
from zoo.errors import OptionsError
from zoo.jobs.train import TrainOptions, make_trainer
from zoo.distributed.launcher import LaunchOptions

from factories import pushpull_loop

from factories import ROOT
LAUNCH = os.path.join(ROOT, "tools", "launch.py")
NETWORK = "ssd_mobilenetv2_stride8"


def train_flags(shapes, output, epochs, *extra):
    return ["--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
            "--data-shape", "128", "--batch-size", "2", "--epochs", str(epochs), "--lr", "0.005",
            "--max-expand", "1", "--no-crop", "--val-set", "", "--no-progress",
            "--data-threads", "1", "--kv-store", "dist_sync", "--output-dir", str(output)]


def started_pids(stderr):
    """The pids the launcher's 'started' line names."""
    return [int(pid) for pid in re.findall(r"\(pid (\d+)\)", stderr)]


def running(pid):
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def launch(args, **kwargs):
    """Run tools/launch.py to the end; returns (CompletedProcess, seconds)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, LAUNCH] + args, capture_output=True, text=True,
                          cwd=ROOT, **kwargs)
    return done, time.monotonic() - start


# -- the launcher's pure parts ----------------------------------------------------------------

def test_host_file_lists_hosts_and_rejects_bad_lines(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# cluster\nnode1\n\n  alice@node2   # second\n10.0.0.3\n")
    assert distributed.read_host_file(str(hosts)) == ["node1", "alice@node2", "10.0.0.3"]
    hosts.write_text("node1\nnode2 slots=4\n")
    with pytest.raises(ValueError, match=":2: one host per line"):
        distributed.read_host_file(str(hosts))
    hosts.write_text("# nobody\n")
    with pytest.raises(ValueError, match="names no host"):
        distributed.read_host_file(str(hosts))


def test_servers_and_workers_go_round_robin_over_hosts():
    nodes = distributed.plan_nodes(2, 3, ["a", "b"])
    assert [(n.role, n.index, n.host) for n in nodes] == [
        ("scheduler", 0, None), ("server", 0, "a"), ("server", 1, "b"),
        ("worker", 0, "a"), ("worker", 1, "b"), ("worker", 2, "a")]
    assert [distributed.label(n) for n in nodes[:2]] == ["scheduler", "server 0@a"]


def test_local_processes_get_their_cluster_environment():
    environ = {"PATH": "/bin", "DMLC_RANK": "5", "PORT": "80", "MXNET_ENGINE_TYPE": "x"}
    options = LaunchOptions(("python", "train.py", "--lr", "1"), num_workers=2, num_servers=1,
                            connect_timeout=7, env=("EXTRA=1",))
    specs = launcher.process_specs(options, environ=environ)
    assert [distributed.label(spec.node) for spec in specs] == [
        "scheduler", "server 0", "worker 0", "worker 1"]
    assert specs[0].argv == specs[1].argv == [sys.executable, "-c", "import mxnet"]
    assert specs[2].argv == specs[3].argv == ["python", "train.py", "--lr", "1"]
    envs = [spec.env for spec in specs]
    scheduler_port = int(envs[0]["DMLC_PS_ROOT_PORT"])
    node_ports = [int(env["PORT"]) for env in envs[1:]]
    # Distinct ports, ascending in launch order so that "worker i" gets rank i.
    assert node_ports == sorted(node_ports) and scheduler_port not in node_ports
    assert len(set(node_ports)) == 3 and "PORT" not in envs[0]
    for spec in specs:
        env = spec.env
        assert env["DMLC_ROLE"] == spec.node.role and "DMLC_RANK" not in env
        assert env["DMLC_PS_ROOT_URI"] == env["DMLC_NODE_HOST"] == "127.0.0.1"
        assert int(env["DMLC_PS_ROOT_PORT"]) == scheduler_port
        assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"]) == ("1", "2")
        assert env["ZOO_CONNECT_TIMEOUT"] == "7" and env["EXTRA"] == "1"
        assert env["PATH"] == "/bin" and env["MXNET_ENGINE_TYPE"] == "x"
    cores = len(os.sched_getaffinity(0))
    assert [env["OMP_NUM_THREADS"] for env in envs] == ["1", "1"] + [str(max(1, cores // 2))] * 2
    mine = launcher.process_specs(options, environ=dict(environ, OMP_NUM_THREADS="3"))
    assert {spec.env["OMP_NUM_THREADS"] for spec in mine} == {"3"}


@pytest.mark.parametrize("given", [None, "3"])
def test_local_workers_share_the_cores_unless_the_user_set_threads(given):
    # The command line chooses OMP_NUM_THREADS (all cores) for itself before it launches:
    # that choice is its own, not the user's, and workers that inherited it ran 2.8x slower.
    environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if given:
        environ["OMP_NUM_THREADS"] = given
    done, _ = launch(["-n", "2", "-s", "1", "--grace", "1", "--", sys.executable, "-c",
                      "import os; print('threads', os.environ['OMP_NUM_THREADS'])"],
                     env=environ, timeout=120)
    assert done.returncode == 0, done.stderr
    cores = len(os.sched_getaffinity(0))
    threads = re.findall(r"^\[worker \d\] threads (\d+)$", done.stdout, re.M)
    assert threads == [given or str(max(1, cores // 2))] * 2, done.stdout


def test_ssh_command_line_is_exact():
    argv = distributed.ssh_argv("alice@node2", ["python", "tools/train.py", "--lr", "0.1"],
                                {"DMLC_ROLE": "worker", "MXNET_X": "a b"}, "/work dir",
                                ssh_port=2222, config="/keys/ssh config", alive_timeout=7)
    assert argv == ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                    "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3",
                    "-F", "/keys/ssh config", "-p", "2222", "alice@node2",
                    "cd '/work dir' && exec env DMLC_ROLE=worker 'MXNET_X=a b' "
                    "python tools/train.py --lr 0.1"]


def test_remote_processes_run_over_ssh_with_forwarded_environment(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("node1\nalice@node2\n")
    environ = {"PATH": "/bin", "HOME": "/home/me", "OMP_NUM_THREADS": "4", "DMLC_RANK": "3",
               "SECRET": "s", "MY_FLAG": "on"}
    options = LaunchOptions(("python", "tools/train.py"), num_workers=2, num_servers=1,
                            host_file=str(hosts), scheduler_host="10.0.0.9", port=9000,
                            interface="eth1", env=("MY_FLAG", "MODE=fast"),
                            remote_dir="/srv/zoo", python="/opt/py", ssh_config="/k/cfg",
                            host_timeout=6)
    specs = launcher.process_specs(options, environ=environ,
                                   hosts=launcher.read_hosts(options.host_file))
    scheduler_argv, scheduler_env = specs[0].argv, specs[0].env
    server_argv, server_env = specs[1].argv, specs[1].env
    assert scheduler_argv == ["/opt/py", "-c", "import mxnet"]
    assert scheduler_env["DMLC_PS_ROOT_URI"] == "10.0.0.9"
    assert scheduler_env["DMLC_PS_ROOT_PORT"] == "9000" and "DMLC_INTERFACE" not in scheduler_env
    assert server_env == environ  # what ssh itself runs with
    cluster = {"DMLC_PS_ROOT_URI": "10.0.0.9", "DMLC_PS_ROOT_PORT": "9000",
               "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "2", "DMLC_INTERFACE": "eth1",
               "OMP_NUM_THREADS": "4", "MY_FLAG": "on", "MODE": "fast",
               "ZOO_CONNECT_TIMEOUT": "120"}
    ssh = {"config": "/k/cfg", "alive_timeout": 6}
    assert server_argv == distributed.ssh_argv(
        "node1", ["/opt/py", "-c", "import mxnet"], dict(cluster, DMLC_ROLE="server"),
        "/srv/zoo", **ssh)
    assert specs[2].argv == distributed.ssh_argv(
        "node1", ["python", "tools/train.py"], dict(cluster, DMLC_ROLE="worker"), "/srv/zoo",
        **ssh)
    assert specs[3].argv[-2] == "alice@node2"


class ExitedPopen:
    def __init__(self, returncode):
        self.returncode = returncode


def launched_with_output(node, returncode, *lines):
    done = launcher.Launched(node, ExitedPopen(returncode))
    for line in lines:
        done.output.note(line)
    return done


def test_failures_name_host_rank_and_what_ssh_or_the_worker_said():
    worker = distributed.Node("worker", 1, "10.0.0.2")
    lost = launched_with_output(worker, 255, "zoo: joined the cluster as worker rank 0 of 2",
                                "epoch 1: lr 0.1", "Timeout, server 10.0.0.2 not responding.",
                                "Connection to 10.0.0.2 closed.")
    assert lost.output.rank == 0
    assert launcher.describe_failure(lost) == (
        "worker 1@10.0.0.2 (rank 0): ssh to 10.0.0.2 failed or lost its connection (exit "
        "255): Timeout, server 10.0.0.2 not responding.")
    unreachable = launched_with_output(worker, 255)
    assert launcher.describe_failure(unreachable).endswith("(exit 255): no message")
    alone = launched_with_output(distributed.Node("worker", 0, None), 75,
                                 "worker: error: no parameter-server cluster after 2 s")
    assert launcher.describe_failure(alone) == (
        "worker 0 found no cluster within --connect-timeout (exit 75): worker: error: no "
        "parameter-server cluster after 2 s")
    # A local 255 is the program's own code, not ssh's.
    assert launcher.describe_failure(launched_with_output(
        distributed.Node("server", 0, None), 255, "x")) == "server 0 exited with code 255"


def test_options_and_host_file_errors_are_one_line(tmp_path):
    with pytest.raises(OptionsError, match="give the worker command after '--'"):
        LaunchOptions(())
    with pytest.raises(OptionsError, match="at least one worker and one server"):
        LaunchOptions(("true",), num_servers=0)
    hosts = tmp_path / "hosts"
    hosts.write_text("node1 slots=2\n")
    with pytest.raises(OptionsError, match=r"host file: .*:1: one host per line"):
        launcher.launch(LaunchOptions(("true",), host_file=str(hosts)))


def test_scheduler_host_is_resolved_and_must_be_this_machines(capsys):
    """ZeroMQ takes no host names (apache/mxnet#12062): the launcher hands ps-lite the
    address, and refuses one the scheduler, which runs here, could not listen on."""
    options = LaunchOptions(("true",), scheduler_host="localhost")
    specs = launcher.process_specs(options, environ={})
    assert {spec.env["DMLC_PS_ROOT_URI"] for spec in specs} == {"127.0.0.1"}
    # 192.0.2.0/24 is TEST-NET-1, documentation only: never an address of this machine.
    for host, expected in (("192.0.2.77", "--scheduler-host 192.0.2.77: not an address of "
                                          "this machine, where the scheduler runs ("),
                           ("no-such-host.invalid", "--scheduler-host no-such-host.invalid: ")):
        assert zoo.cli.main(["launch", "--scheduler-host", host, "--", "true"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("zoo launch: error: " + expected) and err.count("\n") == 1, err


def test_cli_help_lists_the_flags_and_errors_name_the_command(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.cli.main(["launch", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for flag in ("--num-workers", "--num-servers", "--host-file", "--scheduler-host", "--port",
                 "--interface", "--env", "--connect-timeout", "--grace", "--python",
                 "--remote-dir", "--ssh-port", "--ssh-config", "--host-timeout",
                 "(default: 10.0)"):
        assert flag in out, flag
    assert zoo.cli.main(["launch", "-n", "1"]) == 1
    assert capsys.readouterr().err == "zoo launch: error: give the worker command after '--'\n"
    assert zoo.cli.main(["launch", "-H", str(tmp_path / "missing"), "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zoo launch: error: host file: ") and "missing" in err
    assert err.count("\n") == 1


def flags_of(command):
    """The argparse actions of a command's flags (``--help`` aside)."""
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return [action for action in parser._actions
            if action.option_strings and action.dest != "help"]


def test_readme_documents_the_launchers_flags():
    with open(os.path.join(ROOT, "docs", "distributed.md")) as stream:
        section = stream.read().split("\n## Distributed training\n", 1)[1].split("\n## ")[0]
    mentioned = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", section))
    options = set()
    for action in flags_of(launch_command):
        assert mentioned & set(action.option_strings), action.option_strings
        options.update(action.option_strings)
    # Every other long flag there is one of zoo train's.
    train_flags = {flag for action in flags_of(train_command) for flag in action.option_strings}
    for flag in {m for m in mentioned - options if m.startswith("--")}:
        assert flag in train_flags, flag


# -- the training side ------------------------------------------------------------------------

class FakeKVStore:
    """What Trainer reads of a created dist kvstore."""

    def __init__(self, kind, rank, num_workers):
        self.type, self.rank, self.num_workers = kind, rank, num_workers


def test_workers_shard_data_and_average_gradients(shapes, tmp_path):
    options = TrainOptions(network=NETWORK, dataset="voc", data_root=shapes, data_shape=128,
                           batch_size=2, epochs=2, lr_steps=(1,), max_expand=1.0,
                           data_threads=1, output_dir=str(tmp_path), progress=False)
    single = make_trainer(options)
    assert single.gradient_scale() == 1.0
    assert any(isinstance(hook, Validation) for hook in single.hooks)
    sync = make_trainer(options, FakeKVStore("dist_sync", 1, 2))
    assert (sync.loader.num_shards, sync.loader.shard_index) == (2, 1)
    # Only rank 0 validates and saves.
    assert len(sync.loader) == len(single.loader) // 2
    assert not any(hook.only_rank0 for hook in sync.hooks)
    # The servers sum two workers' gradients: halved, the step is that of one batch of 4.
    assert sync.gradient_scale() == 0.5
    assert sync.build_optimizer(len(sync.loader)).lr_scheduler.step == [len(sync.loader)]
    # dist_async applies each push on its own, and counts one update per worker's push.
    asynchronous = make_trainer(options, FakeKVStore("dist_async", 0, 2))
    assert asynchronous.gradient_scale() == 1.0
    assert asynchronous.build_optimizer(2).lr_scheduler.step == [4]


def test_dist_kvstore_outside_a_cluster_is_a_clear_error(shapes, tmp_path, monkeypatch, capsys):
    for name in distributed.CLUSTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert zoo.cli.main(["train", *train_flags(shapes, tmp_path, 1)]) == 1
    err = capsys.readouterr().err
    assert "zoo train: error: kvstore 'dist_sync' needs a parameter-server cluster" in err
    assert "launch" in err


def test_worker_without_a_scheduler_fails_after_the_timeout():
    port = distributed.free_ports(1)[0]
    env = dict(os.environ, DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1",
               DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1",
               DMLC_NODE_HOST="127.0.0.1", ZOO_CONNECT_TIMEOUT="2")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from zoo.distributed.cluster import *; "
                           "create_dist_kvstore('dist_sync')"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == distributed.CONNECT_TIMEOUT_EXIT_CODE
    assert "worker: error: no parameter-server cluster after 2 s: the scheduler at " \
           "127.0.0.1:%d did not answer" % port in done.stderr
    assert time.monotonic() - start < 60


# -- the launcher's processes -----------------------------------------------------------------

FIRST_WORKER_FAILS = textwrap.dedent("""
    import os, sys, time
    try:
        os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        time.sleep(120)
    print("giving up", flush=True)
    sys.exit(3)
""")


def test_a_failing_worker_stops_the_others_and_is_named(tmp_path, capsys):
    start = time.monotonic()
    code = launcher.launch(LaunchOptions((sys.executable, "-c", FIRST_WORKER_FAILS,
                                          str(tmp_path / "first")), num_workers=2, grace=5))
    out, err = capsys.readouterr()
    assert code == 1 and time.monotonic() - start < 30
    failed = re.search(r"zoo launch: error: worker (\d) exited with code 3; "
                       r"stopped the other 3 process\(es\)", err)
    assert failed, err
    assert "[worker %s] giving up" % failed.group(1) in out
    assert not any(running(pid) for pid in started_pids(err))


def test_killed_worker_fails_the_launch_fast(tmp_path):
    launcher = subprocess.Popen([sys.executable, LAUNCH, "-n", "2", "--grace", "5",
                                 "--connect-timeout", "60", "--", sys.executable, "-c",
                                 pushpull_loop(zoo_worker=False)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    try:
        pids = started_pids(launcher.stderr.readline())
        for line in launcher.stdout:
            if line.startswith("[worker 1] summing"):
                break
        killed_at = time.monotonic()
        os.kill(pids[3], signal.SIGKILL)
        out, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert launcher.returncode == 1 and time.monotonic() - killed_at < 15
    assert "zoo launch: error: worker 1 was killed by signal 9 (SIGKILL); stopped the other 3 " \
           "process(es)" in err
    assert not any(running(pid) for pid in pids)


def test_ctrl_c_stops_every_process():
    launcher = subprocess.Popen([sys.executable, LAUNCH, "-n", "2", "--grace", "5", "--",
                                 "sleep", "120"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = started_pids(launcher.stderr.readline())
        assert len(pids) == 4 and all(running(pid) for pid in pids)
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=30)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert launcher.returncode == 128 + signal.SIGINT
    assert "zoo launch: SIGINT: stopped 4 process(es)" in err
    assert not any(running(pid) for pid in pids)


# -- training across two workers --------------------------------------------------------------

# zoo train that also saves the worker's final parameters as final-rank<R>.params.
TRAIN_AND_DUMP = textwrap.dedent("""
    import os, sys
    import mxnet as mx
    import zoo.cli
    from zoo.engine.trainer import Trainer
    fit = Trainer.fit
    def fit_and_dump(self, resume_prefix=None):
        rows = fit(self, resume_prefix)
        arg_params, aux_params = self.params()
        arrays = {"arg:" + k: v for k, v in arg_params.items()}
        arrays.update({"aux:" + k: v for k, v in aux_params.items()})
        output = sys.argv[sys.argv.index("--output-dir") + 1]
        mx.nd.save(os.path.join(output, "final-rank%d.params" % self.rank), arrays)
        return rows
    Trainer.fit = fit_and_dump
    sys.exit(zoo.cli.main(["train", *sys.argv[1:]]))
""")


def dumped_params(path):
    """``(arg_params, aux_params)`` of a final-rank<R>.params file."""
    saved = mx.nd.load(str(path))
    return ({k[4:]: v for k, v in saved.items() if k.startswith("arg:")},
            {k[4:]: v for k, v in saved.items() if k.startswith("aux:")})


def saved_params(prefix, epoch):
    saved = artifact.load(str(prefix), epoch)
    return saved.arg_params, saved.aux_params


def assert_same_params(first, second):
    for a, b in zip(first, second):
        assert sorted(a) == sorted(b)
        for key in a:
            assert np.array_equal(a[key].asnumpy(), b[key].asnumpy()), key


def launch_training(flags):
    # the user's environment: the suite's own choice of threads (all cores) left to the launcher
    done, seconds = launch(["-n", "2", "-s", "1", "--connect-timeout", "300", "--",
                            sys.executable, "-c", TRAIN_AND_DUMP] + flags, timeout=600,
                           env=process.users_environment())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def two_workers(shapes, tmp_path_factory):
    """A 2-epoch run of 1 scheduler, 1 server and 2 workers: (output folder, launch)."""
    output = tmp_path_factory.mktemp("two_workers")
    return output, launch_training(train_flags(shapes, output, 2))


def test_two_workers_end_identical_and_loss_falls(two_workers):
    output, done = two_workers
    prefix = str(output / NETWORK)
    workers = [dumped_params(output / ("final-rank%d.params" % rank)) for rank in (0, 1)]
    assert_same_params(workers[0], workers[1])
    assert_same_params(workers[0], saved_params(prefix, 2))
    initial = zoo.get_model(NETWORK, num_classes=len(embedded.CLASSES),
                            class_names=list(embedded.CLASSES)).init_params(seed=0)[0]
    assert any(not np.array_equal(initial[k].asnumpy(), workers[0][0][k].asnumpy())
               for k in initial)
    # Only rank 0 logs epochs to the CSV and writes checkpoints; rank 1 has its own log.
    with open(prefix + "-log.csv") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    losses = [float(row["cls_loss"]) + float(row["box_loss"]) for row in rows]
    assert losses[1] < losses[0]
    assert artifact.latest_epoch(prefix) == 2
    assert not (output / "worker-0.log").exists()
    assert "epoch 2:" in (output / "worker-1.log").read_text()
    assert "[worker 0] checkpoints and log in" in done.stdout
    assert "[worker 1] worker rank 1: log in" in done.stdout


def optimizer_state(prefix, epoch):
    state = artifact.load_optimizer_state(str(prefix), epoch)
    return state.info, {k: v.asnumpy().tolist() for k, v in state.arrays.items()}


@pytest.mark.slow
def test_distributed_resume_is_exact(two_workers, shapes, tmp_path):
    straight, _ = two_workers
    launch_training(train_flags(shapes, tmp_path, 1))
    launch_training(train_flags(shapes, tmp_path, 2) + ["--resume", "auto"])
    assert_same_params(saved_params(straight / NETWORK, 2), saved_params(tmp_path / NETWORK, 2))
    states = [optimizer_state(run / NETWORK, 2) for run in (straight, tmp_path)]
    assert states[0][1] and states[0] == states[1]
    assert_same_params(dumped_params(tmp_path / "final-rank0.params"),
                       dumped_params(tmp_path / "final-rank1.params"))
    with open(str(tmp_path / (NETWORK + "-log.csv"))) as stream:
        assert [row["epoch"] for row in csv.DictReader(stream)] == ["1", "2"]


def test_cluster_processes_leave_the_synchronous_engine_behind():
    """The zoo picks MXNet's synchronous engine for itself, which ps-lite cannot run on: a
    launched node does not inherit it, nor does a process of a cluster choose it."""
    from zoo import process as runtime
    environ = {"PATH": "/bin", "MXNET_ENGINE_TYPE": runtime.SYNCHRONOUS_ENGINE}
    options = LaunchOptions(("python", "train.py"), num_workers=1, num_servers=1)
    for spec in launcher.process_specs(options, environ=environ):
        assert "MXNET_ENGINE_TYPE" not in spec.env
    alone, worker = {}, {"DMLC_ROLE": "worker"}
    runtime.configure(alone)
    runtime.configure(worker)
    assert alone["MXNET_ENGINE_TYPE"] == runtime.SYNCHRONOUS_ENGINE
    assert "MXNET_ENGINE_TYPE" not in worker and worker["OMP_NUM_THREADS"]
