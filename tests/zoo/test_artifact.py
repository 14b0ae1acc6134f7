"""Format-2 artifacts: self-describing, checked on load, optimizer state without pickle."""
import ast
import hashlib
import json
import os
import pickle
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
import yaml

import zoo
from zoo import artifact
from zoo import predictor as deploy
from zoo.artifact import ArtifactError
from zoo.architectures import ARCHITECTURES
from zoo.engine.module_adapter import optimizer_state, set_optimizer_state
from zoo.jobs.convert import convert_v1
from zoo.inference.quantization import int8_layers, quantize

MODEL = "ssd_mobilenetv2_stride8"


@pytest.fixture(scope="module")
def tiny():
    model = zoo.get_model(MODEL, data_shape=128, num_classes=3)
    model.init_params(seed=0)
    return model


def save_tiny(model, prefix, epoch=1, **kwargs):
    artifact.save(str(prefix), epoch, model, model.arg_params, model.aux_params, **kwargs)
    return str(prefix)


def assert_same_arrays(actual, expected):
    assert sorted(actual) == sorted(expected)
    for name in expected:
        assert actual[name].dtype == expected[name].dtype
        np.testing.assert_array_equal(actual[name].asnumpy(), expected[name].asnumpy(), name)


def detections(model, arg_params, aux_params, symbol=None):
    predictor = deploy.Predictor(model.symbol() if symbol is None else symbol, arg_params,
                                 aux_params)
    data = np.random.RandomState(0).uniform(-1, 1, model.input_shapes()["data"])
    return predictor(**model.input_arrays(data.astype(np.float32)))[0].asnumpy()


# Round trip and self-description

def test_round_trip(tiny, tmp_path):
    best = {"epoch": 2, "metric": "voc07_map", "value": 0.5}
    prefix = save_tiny(tiny, tmp_path / "run", epoch=2, best=best, training={"lr": 0.01})
    loaded = artifact.load(prefix)
    assert loaded.epoch == 2 and loaded.prefix == prefix
    assert_same_arrays(loaded.arg_params, tiny.arg_params)
    assert_same_arrays(loaded.aux_params, tiny.aux_params)
    assert loaded.model.arg_params is loaded.arg_params
    assert loaded.symbol.tojson() == deploy.fuse(tiny.symbol()).tojson()
    assert loaded.model.symbol().tojson() == tiny.symbol().tojson()
    meta = loaded.meta
    assert meta["format"] == artifact.FORMAT_VERSION == 2
    assert meta["zoo_version"] == zoo.__version__
    assert meta["config"] == tiny.config
    assert meta["best"] == best and meta["training"] == {"lr": 0.01}
    assert loaded.class_names == ["0", "1", "2"]
    assert loaded.preprocessing == tiny.preprocessing()
    assert loaded.preprocessing["resize"] == "stretch"
    assert loaded.preprocessing["data_shape"] == [128, 128]
    assert loaded.preprocessing["mean"] == tiny.config["mean_pixels"]
    assert loaded.precision == {"dtype": "fp32"} and not loaded.is_int8
    np.testing.assert_array_equal(detections(loaded.model, loaded.arg_params, loaded.aux_params),
                                  detections(tiny, tiny.arg_params, tiny.aux_params))


def test_export_writes_a_loadable_artifact(tiny, tmp_path):
    symbol_file, params_file = artifact.export(tiny, str(tmp_path / "exported"), fused=False)
    assert symbol_file == str(tmp_path / "exported-symbol.json")
    assert params_file == str(tmp_path / "exported-0000.params")
    loaded = artifact.load(str(tmp_path / "exported"))
    assert loaded.epoch == 0 and loaded.meta["config"] == tiny.config
    assert loaded.symbol.tojson() == tiny.symbol().tojson()
    assert_same_arrays(loaded.arg_params, tiny.arg_params)
    # Still an MXNet checkpoint for plain MXNet users.
    _, arg_params, _ = mx.model.load_checkpoint(str(tmp_path / "exported"), 0)
    assert_same_arrays(arg_params, tiny.arg_params)


@pytest.mark.skipif(not deploy.mkldnn_available(), reason="int8 needs MXNet with MKL-DNN")
def test_an_int8_artifact_loads_its_int8_graph(tiny, tmp_path):
    data = np.random.RandomState(0).uniform(-1, 1, tiny.input_shapes()["data"])
    calib = mx.io.NDArrayIter({"data": mx.nd.array(data)}, batch_size=1)
    symbol, arg_params, aux_params = quantize(deploy.fuse(tiny.symbol()), tiny.arg_params,
                                              tiny.aux_params, calib)
    calibration = {"calib_mode": "naive", "int8_layers": len(int8_layers(symbol))}
    prefix = str(tmp_path / "int8")
    artifact.save(prefix, 1, tiny, arg_params, aux_params, symbol=symbol,
                  precision={"dtype": "int8", "calibration": calibration})
    loaded = artifact.load(prefix)
    assert loaded.is_int8 and loaded.precision["calibration"] == calibration
    assert len(int8_layers(loaded.symbol)) == calibration["int8_layers"] > 0
    assert detections(loaded.model, loaded.arg_params, loaded.aux_params,
                      loaded.symbol).shape[-1] == 6


def test_load_takes_the_best_epoch_else_the_newest(tiny, tmp_path):
    prefix = str(tmp_path / "run")
    for epoch in (1, 2, 3):
        save_tiny(tiny, prefix, epoch)
    assert artifact.epochs(prefix) == [1, 2, 3] and artifact.best_epoch(prefix) is None
    assert artifact.load(prefix).epoch == 3
    save_tiny(tiny, prefix, 4, best={"epoch": 2, "metric": "voc07_map", "value": 0.7})
    assert artifact.best_epoch(prefix) == 2 and artifact.latest_epoch(prefix) == 4
    assert artifact.load(prefix).epoch == 2
    assert artifact.load(prefix, epoch=3).epoch == 3
    os.remove(prefix + "-0004.json")  # an epoch without its metadata is incomplete
    assert artifact.epochs(prefix) == [1, 2, 3] and artifact.load(prefix).epoch == 3


def test_a_users_yaml_is_not_needed_after_training(tmp_path, monkeypatch):
    """Trained from a YAML by relative path, loaded from another folder after the YAML is
    deleted and a default of the config code changed: the artifact keeps its meaning."""
    raw = zoo.get_config(MODEL)
    raw.pop("name")
    (tmp_path / "myconfigs").mkdir()
    (tmp_path / "myconfigs" / "tiny.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    model = zoo.build_model(zoo.load_config("myconfigs/tiny.yaml"), data_shape=128,
                            num_classes=2, class_names=["cat", "dog"])
    arg_params, aux_params = model.init_params(seed=1)
    os.makedirs("runs/tiny")
    artifact.save("runs/tiny/tiny", 1, model, arg_params, aux_params)
    expected = detections(model, arg_params, aux_params)

    os.remove("myconfigs/tiny.yaml")
    os.rmdir("myconfigs")
    arch = ARCHITECTURES["ssd"]
    changed = dict(arch.defaults, nms_threshold=0.2)
    monkeypatch.setattr(type(arch), "defaults", property(lambda self: changed))
    assert zoo.get_model(MODEL, data_shape=128).config["nms_threshold"] == 0.2
    def forbidden(*args, **kwargs):
        raise AssertionError("loading asked the registry or read a YAML file")
    for module in (zoo, zoo.config.registry, zoo.config.loading):  # loading never asks the registry
        for name in ("get_config", "get_model", "load_config", "list_models"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, forbidden)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")

    loaded = artifact.load(str(tmp_path / "runs" / "tiny" / "tiny"))
    assert loaded.model.config == model.config
    assert loaded.model.config["nms_threshold"] == 0.45
    assert loaded.class_names == ["cat", "dog"]
    np.testing.assert_array_equal(
        detections(loaded.model, loaded.arg_params, loaded.aux_params), expected)


# Damaged files: one line naming the file

def one_line_error(prefix, path_suffix, load=artifact.load):
    with pytest.raises(ArtifactError) as error:
        load(prefix)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(prefix + path_suffix), message
    return message


def test_changed_params_are_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    path = prefix + "-0001.params"
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 1
    open(path, "wb").write(bytes(data))
    assert "sha256" in one_line_error(prefix, "-0001.params")


def test_truncated_params_are_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    path = prefix + "-0001.params"
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])
    one_line_error(prefix, "-0001.params")


def test_a_params_file_that_is_not_one_is_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    open(prefix + "-0001.params", "wb").write(b"not parameters")
    meta = json.load(open(prefix + "-0001.json"))
    meta["params_sha256"] = hashlib.sha256(b"not parameters").hexdigest()
    json.dump(meta, open(prefix + "-0001.json", "w"))
    assert "not an MXNet array file" in one_line_error(prefix, "-0001.params")


def test_corrupt_json_is_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    text = open(prefix + "-0001.json").read()
    open(prefix + "-0001.json", "w").write(text[:len(text) // 2])
    assert "not valid JSON" in one_line_error(prefix, "-0001.json")


def test_truncated_symbol_is_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    text = open(prefix + "-symbol.json").read()
    open(prefix + "-symbol.json", "w").write(text[:len(text) // 2])
    one_line_error(prefix, "-symbol.json")


def test_non_finite_parameters_are_refused(tiny, tmp_path):
    arg_params = dict(tiny.arg_params)
    name = sorted(arg_params)[3]
    bad = arg_params[name].copy()
    bad[0] = float("nan")
    arg_params[name] = bad
    prefix = str(tmp_path / "run")
    artifact.save(prefix, 1, tiny, arg_params, tiny.aux_params)
    assert "arg:%s holds NaN" % name in one_line_error(prefix, "-0001.params")


def test_a_format_1_checkpoint_gets_the_conversion_command(tiny, tmp_path):
    prefix = write_format1(tiny, tmp_path / "old")
    message = one_line_error(prefix, "-0002.json")
    assert message == ("%s-0002.json is a format-1 checkpoint; convert it with: "
                       "zoo convert --checkpoint %s" % (prefix, prefix))


def test_a_newer_format_is_refused(tiny, tmp_path):
    prefix = save_tiny(tiny, tmp_path / "run")
    meta = json.load(open(prefix + "-0001.json"))
    json.dump(dict(meta, format=3), open(prefix + "-0001.json", "w"))
    assert "format 3" in one_line_error(prefix, "-0001.json")


# Optimizer state

def toy_batches(count):
    rng = np.random.RandomState(0)
    return [mx.io.DataBatch(data=[mx.nd.array(rng.randn(4, 5))],
                            label=[mx.nd.array(rng.randn(4, 2))]) for _ in range(count)]


def toy_module(contexts, arg_params=None, aux_params=None):
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=8, name="fc1")
    net = mx.sym.Activation(mx.sym.BatchNorm(net, name="bn"), act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
    net = mx.sym.LinearRegressionOutput(net, name="out")
    module = mx.mod.Module(net, label_names=["out_label"], context=contexts)
    module.bind(data_shapes=[("data", (4, 5))], label_shapes=[("out_label", (4, 2))])
    mx.random.seed(1)
    module.init_params(mx.init.Xavier(), arg_params=arg_params, aux_params=aux_params)
    return module


def toy_optimizer(name):
    """A fresh optimizer and schedule, as a resumed run builds them from its options."""
    schedule = mx.lr_scheduler.MultiFactorScheduler([2, 4], factor=0.1, base_lr=0.1,
                                                    warmup_steps=1, warmup_begin_lr=0.01)
    settings = {"momentum": 0.9} if name == "sgd" else {}
    return mx.optimizer.create(name, learning_rate=0.1, wd=1e-4, rescale_grad=0.25,
                               lr_scheduler=schedule, **settings)


def train(module, batches):
    for batch in batches:
        module.forward_backward(batch)
        module.update()
    mx.nd.waitall()


def updater(module):
    return module._kvstore._updater if module._update_on_kvstore else module._updater


def flat_states(module):
    states = {}
    for key, state in updater(module).states.items():
        parts = state if isinstance(state, (tuple, list)) else [state]
        for i, part in enumerate(parts):
            states["%s:%d" % (key, i)] = part
    return states


@pytest.mark.parametrize("name", ["sgd", "adam"])
@pytest.mark.parametrize("devices", [1, 2], ids=["1dev", "2dev-local-kvstore"])
def test_optimizer_state_resumes_exactly(tiny, tmp_path, name, devices):
    contexts = [mx.cpu(i) for i in range(devices)]
    batches = toy_batches(6)
    straight = toy_module(contexts)
    straight.init_optimizer(kvstore="local", optimizer=toy_optimizer(name))
    train(straight, batches)

    first = toy_module(contexts)
    first.init_optimizer(kvstore="local", optimizer=toy_optimizer(name))
    train(first, batches[:3])
    arg_params, aux_params = first.get_params()
    prefix = save_tiny(tiny, tmp_path / "run", optimizer_state=optimizer_state(first))
    state = artifact.load_optimizer_state(prefix, 1)
    assert state.info["settings"]["optimizer"] == name
    assert state.info["settings"]["rescale_grad"] == 0.25

    resumed = toy_module(contexts, arg_params, aux_params)
    resumed.init_optimizer(kvstore="local", optimizer=toy_optimizer(name))
    assert set_optimizer_state(resumed, state)
    saved_optimizer, optimizer = updater(first).optimizer, updater(resumed).optimizer
    assert optimizer.num_update == saved_optimizer.num_update == 3
    assert optimizer._index_update_count == saved_optimizer._index_update_count
    assert_same_arrays(flat_states(resumed), flat_states(first))
    train(resumed, batches[3:])
    assert_same_arrays(resumed.get_params()[0], straight.get_params()[0])

    afresh = toy_module(contexts, arg_params, aux_params)
    afresh.init_optimizer(kvstore="local", optimizer=toy_optimizer(name))
    train(afresh, batches[3:])
    assert not np.array_equal(afresh.get_params()[0]["fc1_weight"].asnumpy(),
                              straight.get_params()[0]["fc1_weight"].asnumpy())


def test_another_optimizer_class_is_refused(tiny, tmp_path):
    first = toy_module([mx.cpu()])
    first.init_optimizer(optimizer=toy_optimizer("sgd"))
    train(first, toy_batches(1))
    other = toy_module([mx.cpu()])
    other.init_optimizer(optimizer=toy_optimizer("adam"))
    with pytest.raises(ValueError, match="sgd's, this run's optimizer is adam"):
        set_optimizer_state(other, optimizer_state(first))


@pytest.mark.parametrize("make", [
    lambda: mx.lr_scheduler.MultiFactorScheduler([5, 9, 12], factor=0.1, base_lr=0.1,
                                                 warmup_steps=3, warmup_begin_lr=0.01),
    lambda: mx.lr_scheduler.FactorScheduler(step=4, factor=0.5, base_lr=0.1, warmup_steps=3,
                                            warmup_begin_lr=0.01),
], ids=["multifactor", "factor"])
def test_a_fresh_schedule_catches_up_with_the_update_count(make):
    """Schedules are not saved: a new one called with the restored count gives the rates
    the uninterrupted one gives."""
    schedule = make()
    straight = [schedule(n) for n in range(1, 20)]
    for resume_at in range(1, 19):
        schedule = make()
        assert [schedule(n) for n in range(resume_at, 20)] == straight[resume_at - 1:]


def test_no_file_is_unpickled(tiny, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("unpickled")
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    module = toy_module([mx.cpu()])
    module.init_optimizer(optimizer=toy_optimizer("adam"))
    train(module, toy_batches(2))
    prefix = save_tiny(tiny, tmp_path / "run", optimizer_state=optimizer_state(module))
    artifact.load(prefix)
    resumed = toy_module([mx.cpu()])
    resumed.init_optimizer(optimizer=toy_optimizer("adam"))
    assert set_optimizer_state(resumed, artifact.load_optimizer_state(prefix, 1))


class _Payload:
    """Unpickling this writes a file: evidence that a pickle ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("with_json", [False, True], ids=["alone", "beside-states-json"])
def test_a_pickled_state_is_refused_not_run(tiny, tmp_path, with_json):
    module = toy_module([mx.cpu()])
    module.init_optimizer(optimizer=toy_optimizer("sgd"))
    train(module, toy_batches(1))
    prefix = save_tiny(tiny, tmp_path / "run",
                       optimizer_state=optimizer_state(module) if with_json else None)
    evidence = tmp_path / "unpickled"
    with open(prefix + "-0001.states", "wb") as stream:
        pickle.dump(_Payload(str(evidence)), stream)
    one_line_error(prefix, "-0001.states",
                   load=lambda prefix: artifact.load_optimizer_state(prefix, 1))
    assert not evidence.exists()


def test_zoo_code_never_unpickles():
    """Neither module imports pickle or calls MXNet's pickling state functions."""
    modules = {"pickle", "_pickle", "cPickle", "dill", "joblib", "shelve"}
    calls = {"get_states", "set_states", "load_optimizer_states", "save_optimizer_states"}
    for module in (artifact, sys.modules["zoo.engine.module_adapter"]):
        found = []
        for node in ast.walk(ast.parse(open(module.__file__).read())):
            if isinstance(node, ast.Import):
                found += [alias.name for alias in node.names if alias.name in modules]
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                found.append(node.module)
            elif isinstance(node, ast.Attribute) and node.attr in calls:
                found.append(node.attr)
            elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
                found.append(node.arg)
        assert found == [], module.__file__


# Housekeeping

def test_prune_keeps_the_newest_and_the_best(tiny, tmp_path):
    prefix = str(tmp_path / "run")
    small = {"w": mx.nd.ones((2,))}
    state = artifact.OptimizerState(arrays={"w:0": mx.nd.zeros((2,))},
                                    info={"settings": {}, "num_update": 1, "parameters": {}})
    for epoch in range(1, 8):
        best = {"epoch": 2, "metric": "voc07_map", "value": 0.9} if epoch >= 2 else None
        artifact.save(prefix, epoch, tiny, small, {}, best=best, optimizer_state=state)
    assert artifact.prune(prefix, 3, keep=(4,)) == [1, 3]
    assert artifact.epochs(prefix) == [2, 4, 5, 6, 7]
    assert artifact.prune(prefix, 2) == [4, 5]
    assert artifact.epochs(prefix) == [2, 6, 7]
    left = sorted(os.listdir(tmp_path))
    assert left == sorted(["run-symbol.json"] + ["run-%04d.%s" % (epoch, ext)
                                                 for epoch in (2, 6, 7)
                                                 for ext in ("params", "json", "states",
                                                             "states.json")])


def test_clean_temporary_files(tmp_path):
    prefix = str(tmp_path / "run")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    leftovers = [prefix + "-0003.params.tmp-%d-0" % ended.pid,
                 prefix + "-symbol.json.tmp-%d" % ended.pid,  # the name before -N was added
                 prefix + "-0003.states.json.tmp-%d" % ended.pid]
    kept = [prefix + "-0004.params.tmp-%d-3" % os.getpid(),  # a save under way
            prefix + "-int8-0003.params.tmp-%d" % ended.pid,  # another artifact's
            prefix + "-0003.params"]
    for path in leftovers + kept:
        open(path, "w").close()
    assert artifact.clean_temporary_files(prefix) == sorted(leftovers)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in kept)


# Format 1

def write_format1(model, prefix, epoch=2, meta=None):
    """A checkpoint as format 1 (``zoo.checkpoint.save``) wrote it: the graph, parameters,
    a pickled optimizer state, and metadata naming the model instead of describing it."""
    prefix = str(prefix)
    with open(prefix + "-symbol.json", "w") as stream:
        stream.write(model.symbol().tojson())
    arrays = {"arg:" + k: v for k, v in model.arg_params.items()}
    arrays.update({"aux:" + k: v for k, v in model.aux_params.items()})
    mx.nd.save(prefix + "-%04d.params" % epoch, arrays)
    with open(prefix + "-%04d.states" % epoch, "wb") as stream:
        pickle.dump(_Payload(prefix + "-unpickled"), stream)
    meta = meta or {"network": MODEL, "overrides": {"num_classes": 3, "data_shape": 128},
                    "seed": 1, "args": {"lr": 0.01}}
    with open(prefix + "-%04d.json" % epoch, "w") as stream:
        json.dump(dict(meta, epoch=epoch), stream, indent=1, sort_keys=True)
    return prefix


def test_convert_v1_in_place(tiny, tmp_path):
    prefix = write_format1(tiny, tmp_path / "old")
    report = convert_v1(prefix)
    assert "\n" not in report
    assert report.startswith("converted %s epoch 2 to format 2" % prefix)
    assert prefix + "-0002.states" in report
    assert not os.path.exists(prefix + "-0002.states")
    assert not os.path.exists(prefix + "-unpickled")
    loaded = artifact.load(prefix)
    assert loaded.epoch == 2 and loaded.meta["config"] == tiny.config
    assert loaded.meta["training"] == {"seed": 1, "args": {"lr": 0.01}}
    assert_same_arrays(loaded.arg_params, tiny.arg_params)
    assert artifact.load_optimizer_state(prefix, 2) is None


def test_convert_v1_to_another_prefix_keeps_int8_calibration(tiny, tmp_path):
    calibration = {"calib_mode": "naive", "int8_layers": 0}
    meta = {"network": MODEL, "overrides": {"num_classes": 3, "data_shape": 128},
            "quantization": calibration}
    prefix = write_format1(tiny, tmp_path / "old", meta=meta)
    output = str(tmp_path / "new")
    convert_v1(prefix, output=output)
    assert os.path.exists(prefix + "-0002.states")  # the original is left as it was
    loaded = artifact.load(output)
    assert loaded.is_int8 and loaded.precision["calibration"] == calibration


def test_convert_v1_needs_the_yaml_it_names(tiny, tmp_path):
    meta = {"network": "myconfigs/gone.yaml", "overrides": {}}
    prefix = write_format1(tiny, tmp_path / "old", meta=meta)
    message = one_line_error(prefix, "-0002.json", load=convert_v1)
    assert "'myconfigs/gone.yaml'" in message
