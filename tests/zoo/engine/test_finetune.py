"""Fine-tuning (zoo.engine.finetune, ``zoo train --init-from``): a new run starts from another
artifact's parameters, its class layers taken class by class where the class names are
shared, from a trained artifact and from GluonCV SSD and Faster R-CNN imports onto a
dataset of two classes of its own."""
import glob
import json
import logging
import os
import xml.etree.ElementTree as ElementTree

import mxnet as mx
import numpy as np
import pytest
import yaml

import zoo
from zoo import artifact
from zoo.cli import main
from zoo.data import embedded
from zoo.data.voc import CLASS_FILE
from zoo.errors import OptionsError
from zoo.engine.finetune import backbone_from, init_from

SMALL_SSD = dict(data_shape=64, from_layers=["c3", ""], num_filters=[-1, 64], strides=[-1, 2],
                 pads=[-1, 1], normalizations=[-1, -1], sizes=[[0.2, 0.3], [0.5, 0.7]],
                 ratios=[[1, 2, 0.5]] * 2, steps=None)
"""A two-map SSD on MobileNetV2's stride-8 stage at 64 pixels (tests/zoo/engine/test_trainer.py's)."""
RENAMED = {"circle": "person", "triangle": "person", "square": "kite", "star": "kite"}
"""The embedded shapes renamed into two classes, one of them among VOC's."""


def small_ssd(classes):
    return zoo.get_model("ssd_mobilenetv2_stride8", num_classes=len(classes),
                         class_names=list(classes), **SMALL_SSD)


def source_artifact(tmp_path, classes, seed=1, **save):
    """An artifact of the small SSD for ``classes`` with seeded random parameters, whose
    class head biases differ row by row (so a row taken from the wrong class shows)."""
    model = small_ssd(classes)
    args, aux = model.init_params(seed=seed)
    for name in ("head0_cls_bias", "head1_cls_bias"):
        args[name] = mx.nd.arange(args[name].shape[0]) + 100
    prefix = str(tmp_path / "source")
    artifact.save(prefix, 0, model, args, aux, **save)
    return prefix, args, aux


def by_class(array, classes):
    """A class head's array as ``(anchors, classes + 1, ...)``."""
    value = array.asnumpy()
    return value.reshape((-1, classes + 1) + value.shape[1:])


def test_shared_classes_and_background_are_taken_row_by_row(tmp_path):
    prefix, source_args, source_aux = source_artifact(tmp_path, ("square", "bar", "disc"))
    model = small_ssd(("disc", "star"))
    args, aux, summary = init_from(model, prefix, seed=7)
    fresh, _ = small_ssd(("disc", "star")).init_params(seed=7)
    for name in ("head0_cls_weight", "head1_cls_bias"):
        ours, theirs, new = by_class(args[name], 2), by_class(source_args[name], 3), \
            by_class(fresh[name], 2)
        np.testing.assert_array_equal(ours[:, 0], theirs[:, 0])   # background
        np.testing.assert_array_equal(ours[:, 1], theirs[:, 3])   # disc, source's third
        np.testing.assert_array_equal(ours[:, 2], new[:, 2])      # star: afresh, seeded
    for name, value in {**source_args, **source_aux}.items():
        if "_cls_" not in name:
            np.testing.assert_array_equal(({**args, **aux})[name].asnumpy(), value.asnumpy())
    assert (summary.copied, summary.mapped, summary.reset) == (
        len(source_args) + len(source_aux) - 4, 4, ())
    assert summary.line() == ("init from %s-0000: %d arrays copied, 4 mapped class by class "
                              "(background and 1 shared of 2 classes; new: star), 0 reset"
                              % (prefix, summary.copied))


def test_the_same_classes_copy_everything(tmp_path):
    classes = ("square", "bar")
    prefix, source_args, _ = source_artifact(tmp_path, classes)
    args, _, summary = init_from(small_ssd(classes), prefix, epoch=0)
    np.testing.assert_array_equal(args["head1_cls_bias"].asnumpy(),
                                  source_args["head1_cls_bias"].asnumpy())
    assert summary.mapped == 0 and summary.copied == len(source_args) + len(_)


def test_the_same_class_count_under_other_names_is_not_copied_whole(tmp_path):
    prefix, source_args, _ = source_artifact(tmp_path, ("square", "bar"))
    args, _, summary = init_from(small_ssd(("bar", "square")), prefix)
    ours, theirs = by_class(args["head0_cls_bias"], 2), by_class(source_args["head0_cls_bias"], 2)
    np.testing.assert_array_equal(ours[:, 1], theirs[:, 2])
    np.testing.assert_array_equal(ours[:, 2], theirs[:, 1])
    assert summary.mapped == 4 and summary.shared == ("bar", "square")


def test_other_layers_that_differ_start_afresh_and_are_named(tmp_path):
    prefix, _, _ = source_artifact(tmp_path, ("square", "bar"))
    wider = zoo.get_model("ssd_mobilenetv2_stride8", num_classes=2,
                          class_names=["square", "bar"], **dict(SMALL_SSD, num_filters=[-1, 32]))
    _, _, summary = init_from(wider, prefix)
    assert summary.reset and all(name.startswith(("extra1", "head1")) for name in summary.reset)
    assert "reset (extra1_" in summary.line()


def test_another_architecture_or_an_int8_source_is_refused_in_one_line(tmp_path):
    prefix, _, _ = source_artifact(tmp_path, ("square", "bar"))
    rcnn = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224, num_classes=2)
    with pytest.raises(OptionsError, match=r"source-0000 is ssd on mobilenetv2, this run's "
                                           r"faster_rcnn_mobilenetv2 is faster_rcnn on "
                                           r"mobilenetv2: fine-tuning needs the same "
                                           r"architecture and backbone"):
        init_from(rcnn, prefix)
    meta_path = artifact.epoch_files(prefix, 0).meta
    meta = artifact.read_json(meta_path)
    meta["precision"] = {"dtype": "int8", "calibration": {"mode": "naive", "batches": 1}}
    with open(meta_path, "w") as out:
        json.dump(meta, out)
    with pytest.raises(OptionsError, match="is an int8 artifact, which runs on MXNet's "
                                           "MKL-DNN only: fine-tune from the fp32"):
        init_from(small_ssd(("square", "bar")), prefix)


# -- a backbone alone, from another architecture ------------------------------------------------

def test_a_backbone_is_taken_from_an_ssd_for_a_faster_rcnn(tmp_path):
    # The SSD's stride-8 trunk: every array of it that the C4 detector's backbone has, and
    # nothing of its heads or extra layers.
    prefix, source_args, source_aux = source_artifact(tmp_path, ("square", "bar"))
    rcnn = zoo.get_model("faster_rcnn_mobilenetv2", data_shape=128, max_size=224, num_classes=2)
    arrays, source = backbone_from(rcnn, prefix)
    saved = {**source_args, **source_aux}
    trunk = [name for name in saved if name.startswith(("conv1", "block"))]
    assert source == prefix + "-0000"
    assert sorted(arrays) == sorted(trunk) and len(trunk) > 50
    for name, array in arrays.items():
        np.testing.assert_array_equal(array.asnumpy(), saved[name].asnumpy())


def test_a_backbone_of_another_network_is_refused_in_one_line(tmp_path):
    prefix, _, _ = source_artifact(tmp_path, ("square", "bar"))
    resnet = zoo.get_model("faster_rcnn_resnet50", data_shape=128, max_size=224, num_classes=2)
    with pytest.raises(OptionsError, match=r"source-0000 has a mobilenetv2 backbone, "
                                           r"faster_rcnn_resnet50's is resnet50"):
        backbone_from(resnet, prefix)


# -- through `zoo train`, from GluonCV imports -------------------------------------------------

@pytest.fixture(scope="module")
def two_classes(tmp_path_factory):
    """The embedded shapes (2 training, 2 held-out images of 128 pixels) renamed into two
    classes, ``person`` (a VOC class) and ``kite`` (not one)."""
    root = embedded.generate(str(tmp_path_factory.mktemp("two")), seed=2, num_train=2,
                             num_val=2, image_size=128)
    folder = os.path.join(root, "Annotations")
    for name in os.listdir(folder):
        tree = ElementTree.parse(os.path.join(folder, name))
        for node in tree.iter("name"):
            node.text = RENAMED[node.text]
        tree.write(os.path.join(folder, name))
    with open(os.path.join(root, CLASS_FILE), "w") as out:
        out.write("person\nkite\n")
    return root


def fine_tune(root, source, output, caplog, *flags):
    """``zoo train --init-from source`` for one epoch on ``root``, then ``zoo eval`` of the
    result; returns the init summary line and the evaluation's output."""
    caplog.set_level(logging.INFO, logger="zoo.train")
    assert main(["train", "--init-from", source, "--dataset", "voc", "--data-root", root,
                 "--output-dir", output, "--batch-size", "2", "--epochs", "1", "--val-split",
                 "", "--no-progress", "--data-threads", "1", "--lr", "0.001"] + list(flags)) == 0
    line, = [r.getMessage() for r in caplog.records if r.getMessage().startswith("init from")]
    meta_path, = glob.glob(os.path.join(output, "*-0001.json"))  # epochs count from 1
    prefix = meta_path[:-len("-0001.json")]
    assert artifact.read_meta(prefix, 1)["class_names"] == ["person", "kite"]
    return line, prefix


def test_an_imported_gluoncv_ssd_fine_tunes_onto_two_classes(two_classes, tmp_path, caplog,
                                                             capsys):
    from test_gluoncv_ssd import VOC, randomise, small_gluon_ssd, small_overrides
    from zoo.gluoncv.common import import_net
    source = str(tmp_path / "ssd")
    import_net(VOC, randomise(small_gluon_ssd(), 128), source, "test weights",
               **small_overrides())
    arrays = sum(map(len, artifact.read_params(artifact.epoch_files(source, 0).params)))
    line, prefix = fine_tune(two_classes, source, str(tmp_path / "out"), caplog)
    # the four class heads' weights and biases mapped: background and person (VOC's 15th)
    # taken, kite afresh
    assert line == ("init from %s-0000: %d arrays copied, 8 mapped class by class (background "
                    "and 1 shared of 2 classes; new: kite), 0 reset" % (source, arrays - 8))
    capsys.readouterr()
    assert main(["eval", "--checkpoint", prefix, "--dataset", "voc", "--data-root",
                 two_classes, "--split", "val", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "person" in out and "kite" in out and "mAP" in out


def small_rcnn_config(tmp_path):
    """GluonCV's C4 Faster R-CNN config at 128 pixels sampling few anchors and ROIs: a YAML
    file a fine-tuning run names with ``--network``."""
    path = str(tmp_path / "small_rcnn.yaml")
    with open(path, "w") as out:
        yaml.safe_dump({"base": "faster_rcnn_resnet50_gluoncv_voc", "data_shape": 128,
                        "max_size": 128, "rpn_pre_nms_top_n_train": 300,
                        "rpn_post_nms_top_n_train": 32, "rpn_post_nms_top_n_test": 16,
                        "rpn_batch_size": 32, "rcnn_batch_rois": 8, "shapes": {128: {}}}, out)
    return path


@pytest.mark.slow  # 10-30 s: in `make test-slow`, to keep `make test` within its 12 minutes
def test_an_imported_gluoncv_faster_rcnn_fine_tunes_onto_two_classes(two_classes, tmp_path,
                                                                     caplog, capsys):
    from test_gluoncv_rcnn import random_gluon_net
    from zoo.gluoncv import import_gluoncv
    name = "faster_rcnn_resnet50_v1b_voc"
    params = str(tmp_path / "rcnn.params")
    random_gluon_net(name, 16).save_parameters(params)
    source = import_gluoncv(name, params=params, output=str(tmp_path / "rcnn")).prefix
    line, prefix = fine_tune(two_classes, source, str(tmp_path / "out"), caplog,
                             "--network", small_rcnn_config(tmp_path))
    arrays = sum(map(len, artifact.read_params(artifact.epoch_files(source, 0).params)))
    # class scores and per-class box deltas (weights and biases) taken class by class
    assert line == ("init from %s-0000: %d arrays copied, 4 mapped class by class (background "
                    "and 1 shared of 2 classes; new: kite), 0 reset" % (source, arrays - 4))
    capsys.readouterr()
    assert main(["eval", "--checkpoint", prefix, "--dataset", "voc", "--data-root",
                 two_classes, "--split", "val", "--no-progress"]) == 0
    assert "mAP" in capsys.readouterr().out


def test_init_from_needs_a_network_or_an_artifact(capsys):
    assert main(["train", "--epochs", "1"]) == 2
    assert capsys.readouterr().err == ("zoo train: error: one of the arguments --network "
                                       "--init-from is required\n")


def test_another_architecture_is_refused_by_zoo_train_in_one_line(two_classes, tmp_path,
                                                                  capsys):
    prefix, _, _ = source_artifact(tmp_path, ("square", "bar"))
    assert main(["train", "--init-from", prefix, "--network", "faster_rcnn_mobilenetv2",
                 "--dataset", "voc", "--data-root", two_classes, "--batch-size", "2",
                 "--output-dir", str(tmp_path / "out"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err == ("zoo train: error: init_from %s-0000 is ssd on mobilenetv2, this run's "
                   "faster_rcnn_mobilenetv2 is faster_rcnn on mobilenetv2: fine-tuning needs "
                   "the same architecture and backbone\n" % prefix)
    assert not os.path.exists(str(tmp_path / "out" / "faster_rcnn_mobilenetv2-0001.json"))
