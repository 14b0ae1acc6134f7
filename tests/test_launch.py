"""tools/launch.py and distributed training (kvstore dist_sync), on loopback only: every
cluster here is a scheduler, servers and workers on 127.0.0.1 at free ports."""
import csv
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from test_tools import assert_same_params, load_tool
from zoo import checkpoint, distributed
from zoo.data import embedded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "tools", "launch.py")
NETWORK = "ssd_mobilenetv2_stride8"

launch_tool, train_tool = load_tool("launch"), load_tool("train")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """8 training images: 2 steps per epoch for 2 workers with a batch of 2 each."""
    return embedded.generate(str(tmp_path_factory.mktemp("shapes")), seed=1, num_train=8,
                             num_val=2, image_size=128)


def train_flags(shapes, output, epochs, *extra):
    return ["--network", NETWORK, "--dataset", "voc", "--data-root", shapes,
            "--data-shape", "128", "--batch-size", "2", "--epochs", str(epochs), "--lr", "0.02",
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
    args = launch_tool.parse_args(["-n", "2", "-s", "1", "--connect-timeout", "7",
                                   "--env", "EXTRA=1", "--", "python", "train.py", "--lr", "1"])
    specs = launch_tool.process_specs(args, environ=environ)
    assert [distributed.label(node) for node, _, _ in specs] == [
        "scheduler", "server 0", "worker 0", "worker 1"]
    assert specs[0][1] == specs[1][1] == [sys.executable, "-c", "import mxnet"]
    assert specs[2][1] == specs[3][1] == ["python", "train.py", "--lr", "1"]
    envs = [env for _, _, env in specs]
    scheduler_port = int(envs[0]["DMLC_PS_ROOT_PORT"])
    node_ports = [int(env["PORT"]) for env in envs[1:]]
    # Distinct ports, ascending in launch order so that "worker i" gets rank i.
    assert node_ports == sorted(node_ports) and scheduler_port not in node_ports
    assert len(set(node_ports)) == 3 and "PORT" not in envs[0]
    for (node, _, env) in specs:
        assert env["DMLC_ROLE"] == node.role and "DMLC_RANK" not in env
        assert env["DMLC_PS_ROOT_URI"] == env["DMLC_NODE_HOST"] == "127.0.0.1"
        assert int(env["DMLC_PS_ROOT_PORT"]) == scheduler_port
        assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"]) == ("1", "2")
        assert env["ZOO_CONNECT_TIMEOUT"] == "7" and env["EXTRA"] == "1"
        assert env["PATH"] == "/bin" and env["MXNET_ENGINE_TYPE"] == "x"
    cores = len(os.sched_getaffinity(0))
    assert [env["OMP_NUM_THREADS"] for env in envs] == ["1", "1"] + [str(max(1, cores // 2))] * 2
    mine = launch_tool.process_specs(args, environ=dict(environ, OMP_NUM_THREADS="3"))
    assert {env["OMP_NUM_THREADS"] for _, _, env in mine} == {"3"}


def test_ssh_command_line_is_exact():
    argv = distributed.ssh_argv("alice@node2", ["python", "tools/train.py", "--lr", "0.1"],
                                {"DMLC_ROLE": "worker", "MXNET_X": "a b"}, "/work dir",
                                ssh_port=2222)
    assert argv == ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                    "-p", "2222", "alice@node2",
                    "cd '/work dir' && exec env DMLC_ROLE=worker 'MXNET_X=a b' "
                    "python tools/train.py --lr 0.1"]


def test_remote_processes_run_over_ssh_with_forwarded_environment(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("node1\nalice@node2\n")
    environ = {"PATH": "/bin", "HOME": "/home/me", "OMP_NUM_THREADS": "4", "DMLC_RANK": "3",
               "SECRET": "s", "MY_FLAG": "on"}
    args = launch_tool.parse_args(
        ["-n", "2", "-s", "1", "-H", str(hosts), "--scheduler-host", "10.0.0.9", "--port",
         "9000", "--interface", "eth1", "--env", "MY_FLAG", "--env", "MODE=fast",
         "--remote-dir", "/srv/zoo", "--python", "/opt/py", "--", "python", "tools/train.py"])
    specs = launch_tool.process_specs(args, environ=environ,
                                      hosts=distributed.read_host_file(str(hosts)))
    (_, scheduler_argv, scheduler_env), (_, server_argv, server_env) = specs[:2]
    assert scheduler_argv == ["/opt/py", "-c", "import mxnet"]
    assert scheduler_env["DMLC_PS_ROOT_URI"] == "10.0.0.9"
    assert scheduler_env["DMLC_PS_ROOT_PORT"] == "9000" and "DMLC_INTERFACE" not in scheduler_env
    assert server_env == environ  # what ssh itself runs with
    cluster = {"DMLC_PS_ROOT_URI": "10.0.0.9", "DMLC_PS_ROOT_PORT": "9000",
               "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "2", "DMLC_INTERFACE": "eth1",
               "OMP_NUM_THREADS": "4", "MY_FLAG": "on", "MODE": "fast",
               "ZOO_CONNECT_TIMEOUT": "120"}
    assert server_argv == distributed.ssh_argv(
        "node1", ["/opt/py", "-c", "import mxnet"], dict(cluster, DMLC_ROLE="server"),
        "/srv/zoo")
    assert specs[2][1] == distributed.ssh_argv(
        "node1", ["python", "tools/train.py"], dict(cluster, DMLC_ROLE="worker"), "/srv/zoo")
    assert specs[3][1][-2] == "alice@node2"


def test_readme_documents_the_launchers_flags():
    with open(os.path.join(ROOT, "README.md")) as stream:
        section = stream.read().split("\n## Distributed training\n", 1)[1].split("\n## ")[0]
    with open(os.path.join(ROOT, "tools", "train.py")) as stream:
        train_source = stream.read()
    mentioned = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", section))
    options = set()
    for action in launch_tool.build_parser()._actions:
        if action.option_strings and action.dest != "help":
            assert mentioned & set(action.option_strings), action.option_strings
            options.update(action.option_strings)
    # Every other long flag there is one of tools/train.py's.
    for flag in {m for m in mentioned - options if m.startswith("--")}:
        assert '"%s"' % flag in train_source, flag


# -- the training side ------------------------------------------------------------------------

class FakeKVStore:
    """What Trainer reads of a created dist kvstore."""

    def __init__(self, kind, rank, num_workers):
        self.type, self.rank, self.num_workers = kind, rank, num_workers


def test_workers_shard_data_and_average_gradients(shapes, tmp_path):
    args = train_tool.parse_args(train_flags(shapes, tmp_path, 2) + [
        "--kv-store", "local", "--val-set", "val", "--lr-steps", "1"])
    single = train_tool.make_trainer(args)
    assert single.gradient_scale() == 1.0 and single.val_dataset is not None
    sync = train_tool.make_trainer(args, FakeKVStore("dist_sync", 1, 2))
    assert (sync.loader.num_shards, sync.loader.shard_index) == (2, 1)
    assert len(sync.loader) == len(single.loader) // 2 and sync.val_dataset is None
    # The servers sum two workers' gradients: halved, the step is that of one batch of 4.
    assert sync.gradient_scale() == 0.5
    assert sync.optimizer(len(sync.loader)).lr_scheduler.step == [len(sync.loader)]
    # dist_async applies each push on its own, and counts one update per worker's push.
    asynchronous = train_tool.make_trainer(args, FakeKVStore("dist_async", 0, 2))
    assert asynchronous.gradient_scale() == 1.0
    assert asynchronous.optimizer(2).lr_scheduler.step == [4]


def test_dist_kvstore_outside_a_cluster_is_a_clear_error(shapes, tmp_path, monkeypatch, capsys):
    for name in distributed.CLUSTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert train_tool.main(train_flags(shapes, tmp_path, 1)) == 1
    err = capsys.readouterr().err
    assert "train.py: error: kvstore 'dist_sync' needs a parameter-server cluster" in err
    assert "tools/launch.py" in err


def test_worker_without_a_scheduler_fails_after_the_timeout():
    port = distributed.free_ports(1)[0]
    env = dict(os.environ, DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1",
               DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1",
               DMLC_NODE_HOST="127.0.0.1", ZOO_CONNECT_TIMEOUT="2")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from zoo.distributed import *; "
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
    code = launch_tool.main(["-n", "2", "--grace", "5", "--", sys.executable, "-c",
                             FIRST_WORKER_FAILS, str(tmp_path / "first")])
    out, err = capsys.readouterr()
    assert code == 1 and time.monotonic() - start < 30
    failed = re.search(r"launch.py: error: worker (\d) exited with code 3; "
                       r"stopped the other 3 process\(es\)", err)
    assert failed, err
    assert "[worker %s] giving up" % failed.group(1) in out
    assert not any(running(pid) for pid in started_pids(err))


# Each worker keeps summing gradients through the servers until it is killed.
PUSHPULL_LOOP = textwrap.dedent("""
    import mxnet as mx
    kv = mx.kv.create("dist_sync")
    print("rank", kv.rank, flush=True)
    kv.init("w", mx.nd.zeros((1000,)))
    gradient = mx.nd.ones((1000,))
    for step in range(10 ** 6):
        kv.pushpull("w", gradient, out=gradient)
        gradient.wait_to_read()
        if step == 10:
            print("summing", flush=True)
""")


def test_killed_worker_fails_the_launch_fast(tmp_path):
    launcher = subprocess.Popen([sys.executable, LAUNCH, "-n", "2", "--grace", "5",
                                 "--connect-timeout", "60", "--", sys.executable, "-c",
                                 PUSHPULL_LOOP], cwd=ROOT,
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
    assert "launch.py: error: worker 1 was killed by signal 9 (SIGKILL); stopped the other 3 " \
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
    assert "launch.py: SIGINT: stopped 4 process(es)" in err
    assert not any(running(pid) for pid in pids)


# -- training across two workers --------------------------------------------------------------

# tools/train.py that also saves the worker's final parameters as final-rank<R>.params.
TRAIN_AND_DUMP = textwrap.dedent("""
    import os, runpy, sys
    import mxnet as mx
    from zoo import training
    build_module, fit = training.Trainer.build_module, training.Trainer.fit
    def remember_module(self):
        self.module = build_module(self)
        return self.module
    def fit_and_dump(self):
        rows = fit(self)
        arg_params, aux_params = self.current_params(self.module)
        arrays = {"arg:" + k: v for k, v in arg_params.items()}
        arrays.update({"aux:" + k: v for k, v in aux_params.items()})
        mx.nd.save(os.path.join(self.options.output_dir, "final-rank%%d.params" %% self.rank),
                   arrays)
        return rows
    training.Trainer.build_module, training.Trainer.fit = remember_module, fit_and_dump
    sys.argv = ["train.py"] + sys.argv[1:]
    runpy.run_path(os.path.join(%r, "tools", "train.py"), run_name="__main__")
""" % ROOT)


def launch_training(flags):
    done, seconds = launch(["-n", "2", "-s", "1", "--connect-timeout", "300", "--",
                            sys.executable, "-c", TRAIN_AND_DUMP] + flags, timeout=600)
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
    workers = [checkpoint.load_params(str(output / ("final-rank%d.params" % rank)))
               for rank in (0, 1)]
    assert_same_params(workers[0], workers[1])
    assert_same_params(workers[0], checkpoint.load(prefix, 2)[:2])
    initial = train_tool.build_model(train_tool.parse_args(["--network", NETWORK]),
                                     embedded.CLASSES)[0].init_params(seed=0)[0]
    assert any(not np.array_equal(initial[k].asnumpy(), workers[0][0][k].asnumpy())
               for k in initial)
    # Only rank 0 logs epochs to the CSV and writes checkpoints; rank 1 has its own log.
    with open(prefix + "-log.csv") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    losses = [float(row["cls_loss"]) + float(row["box_loss"]) for row in rows]
    assert losses[1] < losses[0]
    assert checkpoint.latest_epoch(prefix) == 2
    assert not (output / "worker-0.log").exists()
    assert "epoch 2:" in (output / "worker-1.log").read_text()
    assert "[worker 0] checkpoints and log in" in done.stdout
    assert "[worker 1] worker rank 1: log in" in done.stdout


@pytest.mark.slow
def test_distributed_resume_is_exact(two_workers, shapes, tmp_path):
    straight, _ = two_workers
    launch_training(train_flags(shapes, tmp_path, 1))
    launch_training(train_flags(shapes, tmp_path, 2) + ["--resume", "auto"])
    prefix = NETWORK
    assert_same_params(checkpoint.load(str(straight / prefix), 2)[:2],
                       checkpoint.load(str(tmp_path / prefix), 2)[:2])
    states = [checkpoint.load(str(run / prefix), 2)[2] for run in (straight, tmp_path)]
    assert states[0] and states[0] == states[1]
    assert_same_params(checkpoint.load_params(str(tmp_path / "final-rank0.params")),
                       checkpoint.load_params(str(tmp_path / "final-rank1.params")))
    with open(str(tmp_path / (prefix + "-log.csv"))) as stream:
        assert [row["epoch"] for row in csv.DictReader(stream)] == ["1", "2"]
