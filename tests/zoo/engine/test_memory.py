"""Memory-saving training (zoo.engine.memory): recomputing in backward must not change the math;
tools/benchmark_memory.py and zoo train --memory-saving on tiny cases."""
import dataclasses
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import zoo
import zoo.cli
from zoo import artifact
from symbols.layers import add, conv_bn, dense, relu
from test_jobs import ROOT, train_flags
from zoo.jobs.train import TrainOptions, make_trainer
from zoo.engine.memory import MIRROR_ATTR, ForwardGraph, MemoryPlanner, memory_saving_symbol


def residual_net():
    """A stem, two residual units and a classifier: the smallest graph with the structure
    segmenting relies on."""
    out = conv_bn(mx.sym.Variable("data"), "stem", 8, kernel=3)
    for unit in ("unit1", "unit2"):
        branch = conv_bn(out, unit + "_conv1", 8, kernel=3)
        branch = conv_bn(branch, unit + "_conv2", 8, kernel=3, act=None)
        out = relu(add(branch, out, unit + "_add"), unit + "_relu")
    logits = dense(mx.sym.Flatten(out, name="flatten"), "fc", 3)
    return mx.sym.SoftmaxOutput(logits, mx.sym.Variable("label"), name="softmax")


def mirrored_names(symbol):
    return {name for name, attrs in symbol.attr_dict().items()
            if attrs.get(MIRROR_ATTR) == "True"}


def names(graph, indices):
    return [graph.nodes[i]["name"] for i in indices]


def test_segments_end_at_cut_points_before_the_loss():
    input_shapes = {"data": (2, 3, 16, 16), "label": (2,)}
    graph = ForwardGraph(residual_net(), input_shapes)
    # Inside a unit the shortcut is still to be read: no cut point there.
    assert names(graph, graph.cut_points) == [
        "stem", "stem_bn", "stem_relu", "unit1_add", "unit1_relu", "unit2_add", "unit2_relu",
        "flatten", "fc", "softmax"]
    assert names(graph, graph.candidates) == [
        "stem_relu", "unit1_add", "unit1_relu", "unit2_add", "unit2_relu"]
    recomputable = set(names(graph, graph.recomputable()))
    assert "unit1_conv1" in recomputable and not {"flatten", "fc", "softmax"} & recomputable
    assert set(names(graph, graph.mirrored(budget_bytes=0))) == recomputable - set(
        names(graph, graph.candidates))
    assert set(names(graph, graph.mirrored(budget_bytes=float("inf")))) == recomputable - {
        "unit2_relu"}
    # With the first unit's parameters fixed, it has no backward: nothing to recompute there.
    fixed = [n for n in residual_net().list_arguments() if n.startswith(("stem", "unit1"))]
    frozen = ForwardGraph(residual_net(), input_shapes, fixed)
    assert set(names(frozen, frozen.recomputable())) == {
        n for n in recomputable if n.startswith("unit2")}


def training_step(symbol, input_shapes, inputs, arg_params, aux_params):
    """Outputs, gradients and batch-norm statistics after one forward and backward."""
    planner = MemoryPlanner(symbol, input_shapes)
    executor = symbol.bind(mx.cpu(), {n: a.copy() for n, a in planner.args.items()},
                           args_grad=planner.grads, grad_req=planner.grad_req,
                           aux_states={n: a.copy() for n, a in aux_params.items()})
    executor.copy_params_from(arg_params)
    for name, array in inputs.items():
        executor.arg_dict[name][:] = array
    outputs = [out.asnumpy() for out in executor.forward(is_train=True)]
    executor.backward()
    gradients = {n: g.asnumpy() for n, g in executor.grad_dict.items() if g is not None}
    return outputs, gradients, {n: a.asnumpy() for n, a in executor.aux_dict.items()}


def assert_same_step(plain, recomputing):
    for name, first, second in zip(("outputs", "gradients", "statistics"), plain, recomputing):
        if isinstance(first, dict):
            assert sorted(first) == sorted(second), name
            first, second = [first[k] for k in sorted(first)], [second[k] for k in sorted(second)]
        for a, b in zip(first, second):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_recomputing_gives_the_same_losses_gradients_and_statistics():
    model = zoo.get_model("ssd_mobilenetv2", data_shape=192, num_classes=3)
    input_shapes = model.train_input_shapes(batch_size=2, max_objects=4)
    arg_params, aux_params = model.init_params(seed=0)
    rng = np.random.RandomState(0)
    label = np.full(input_shapes["label"], -1, np.float32)
    label[:, 0, :5] = [1, 0.1, 0.1, 0.5, 0.6]
    label[:, 1, :5] = [2, 0.4, 0.3, 0.9, 0.8]
    inputs = dict(model.input_arrays(rng.uniform(-1, 1, input_shapes["data"])), label=label)
    plain = model.train_symbol()
    recomputing = memory_saving_symbol(plain, input_shapes)
    assert len(mirrored_names(recomputing)) > 50 and not mirrored_names(plain)
    planner = MemoryPlanner(plain, input_shapes)
    assert planner.planned_mb(recomputing) < planner.planned_mb(plain)
    assert_same_step(training_step(plain, input_shapes, inputs, arg_params, aux_params),
                     training_step(recomputing, input_shapes, inputs, arg_params, aux_params))


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_benchmark_tool_reports_memory_and_time_of_each_configuration():
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "benchmark_memory.py"), "--network",
         "ssd_mobilenetv2_stride8", "--data-shape", "160", "--batch-size", "1", "--steps", "1",
         "--warmup", "0", "--configurations", "plain,memory-saving"],
        capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    lines = out.splitlines()
    assert lines[0].startswith("ssd_mobilenetv2_stride8, batch 1, data shape 160,")
    assert lines[1].split()[:3] == ["configuration", "planned", "MB"]
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in lines[2:4]}
    assert set(rows) == {"plain", "memory-saving"}
    for planned, peak, step, cpu, loss in rows.values():
        assert 0 < planned < peak and step > 0 and cpu > 0 and np.isfinite(loss)
    assert rows["memory-saving"][0] < rows["plain"][0]
    assert rows["memory-saving"][4] == pytest.approx(rows["plain"][4], rel=1e-5)
    assert lines[4].startswith("memory-saving / plain: peak RSS ")


def test_train_memory_saving_flag_trains_an_epoch(shapes192, tmp_path, caplog):  # noqa: F811
    options = TrainOptions(network="ssd_mobilenetv2", dataset="voc", data_root=shapes192,
                           data_shape=192, batch_size=4, epochs=1, val_split="",
                           data_threads=2, output_dir=str(tmp_path), progress=False,
                           memory_saving=True)
    assert len(mirrored_names(make_trainer(options).build_module().symbol)) > 50
    plain = dataclasses.replace(options, memory_saving=False)
    assert not mirrored_names(make_trainer(plain).build_module().symbol)
    caplog.set_level("INFO", logger="zoo.engine.memory")
    flags = train_flags(shapes192, tmp_path, "--val-set", "", "--memory-saving")
    assert zoo.cli.main(["train", *flags]) == 0
    assert "recomputed in backward" in caplog.text
    assert artifact.epochs(str(tmp_path / "ssd_mobilenetv2")) == [1]
