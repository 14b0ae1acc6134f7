"""``zoo benchmark-parity --architecture faster_rcnn`` (zoo_bench/parity_rcnn.py): GluonCV's
``FasterRCNN`` on its MobileNetV2 and the zoo's import of it detect alike, start equal, take
the same first steps, and a whole run through the command line (slow)."""
import json
import os

import mxnet as mx
import numpy as np
import pytest

from zoo import artifact
from zoo.cli import main
from zoo.model import build_model
from zoo_bench import parity, parity_rcnn
from zoo_bench.options import ParityBenchmarkOptions

from factories import TINY_SSD, initialised_artifact

from test_gluoncv_rcnn import (MEAN, STD, as_gluoncv_runs, differences,  # noqa: F401
                               gluon_rows, our_rows)

gluoncv = pytest.importorskip("gluoncv")
from gluoncv.data.transforms.presets.rcnn import transform_test  # noqa: E402

CLASSES = ["circle", "square", "triangle", "star"]
CLASSES_OF_DATA = parity.embedded_classes()


def calibrated(net, rng):
    """``net`` with every batch norm's statistics those of its input (half the variance, so
    that the scores spread) on two random images and 64 random ROIs, its class predictor
    wider: random weights whose detections are distinct, so that a wrong map shows. (A fresh
    network's running statistics leave every ROI's features alike: every score ties.)"""
    def from_input(block, inputs):
        value = inputs[0]
        mean = value.mean(axis=(0, 2, 3))
        variance = ((value - mean.reshape((1, -1, 1, 1))) ** 2).mean(axis=(0, 2, 3))
        block.running_mean.set_data(mean)
        block.running_var.set_data(variance * 0.5 + 1e-3)

    hooks = []

    def hook(block):
        if isinstance(block, mx.gluon.nn.BatchNorm):
            hooks.append(block.register_forward_pre_hook(from_input))
        for child in block._children.values():
            hook(child)
    hook(net.features)
    hook(net.top_features)
    images = [random_input(rng, 300, 400) for _ in range(2)]
    features = net.features(mx.nd.concat(*images, dim=0))
    corners = rng.uniform(0, 200, (64, 2))
    rois = np.concatenate([rng.randint(0, 2, (64, 1)), corners,
                           corners + rng.uniform(16, 200, (64, 2))], axis=1)
    net.top_features(mx.nd.contrib.ROIAlign(features, mx.nd.array(rois), (14, 14), 1 / 16.,
                                            sample_ratio=2))
    for handle in hooks:
        handle.detach()
    for param in net.collect_params(".*gamma|.*beta").values():
        param.set_data(mx.nd.array(rng.uniform(0.8, 1.2, param.shape) if param.name.endswith(
            "gamma") else rng.normal(0, 0.05, param.shape)))
    net.class_predictor.weight.set_data(mx.nd.array(
        rng.normal(0, 0.1, net.class_predictor.weight.shape)))
    return net


def random_input(rng, height, width):
    """A random image resized and normalised by GluonCV's ``transform_test`` at the
    config's 256 x 384."""
    image = mx.nd.array(rng.randint(0, 256, (height, width, 3)), dtype="uint8")
    return transform_test(image, short=256, max_size=384, mean=MEAN, std=STD)[0]


def test_the_imported_rcnn_detects_what_gluoncvs_detects(tmp_path, as_gluoncv_runs):  # noqa: F811
    # The map (zoo.gluoncv.rcnn.map_c4_mobilenetv2) proved as the published detectors' maps
    # are: the top 100 detections, same classes in the same order, scores within 1e-4 and
    # boxes within 0.01 pixel, on a landscape and a portrait image.
    rng = np.random.RandomState(0)
    spec = parity_rcnn.zoo_spec(CLASSES)
    net = calibrated(parity_rcnn.initialised_rcnn(parity_rcnn.rcnn_network(spec), CLASSES), rng)
    prefix = parity_rcnn.import_gluon(net, str(tmp_path / "rcnn"), "test weights")
    stored = artifact.load(prefix, 0)
    model = build_model(stored.model.config)
    for height, width in ((300, 400), (400, 260)):
        x = random_input(rng, height, width)
        theirs = gluon_rows(net, x)
        ours = our_rows(model, stored.arg_params, stored.aux_params, x)
        same, score, box = differences(ours, theirs)
        assert len(theirs) == len(ours) == 100
        assert theirs[0, 1] - theirs[-1, 1] > 0.1  # the scores spread: no ties decide
        assert same == len(ours), "the classes differ from detection %d" % same
        assert score < 1e-4
        assert box < 0.01


def demo_artifact(folder):
    """A small SSD where ``make demo`` (run in ``folder``) leaves its detector, the start of
    the C4 comparison's trunk by default."""
    from zoo.jobs.quickstart import trained_prefix
    return initialised_artifact(os.path.join(str(folder), trained_prefix()),
                                "ssd_mobilenetv2_stride8", CLASSES, seed=5, **TINY_SSD)


def test_each_architecture_takes_its_defaults_from_one_table(tmp_path, monkeypatch):
    from zoo_bench.options import PARITY_DEFAULTS
    monkeypatch.chdir(tmp_path)
    demo_artifact(tmp_path)
    for architecture, defaults in PARITY_DEFAULTS.items():
        options = ParityBenchmarkOptions(architecture=architecture)
        assert {name: getattr(options, name) for name in defaults} == defaults
    given = ParityBenchmarkOptions(architecture="faster_rcnn", epochs=7, lr_steps=(5,),
                                   backbone_from="none")
    assert (given.epochs, given.lr_steps, given.batch_size) == (7, (5,), 1)


def benchmark_start(work, **options):
    """A seed's start as the benchmark makes it, on 4 generated training images:
    ``(options, data root, GluonCV's parameter file, the imported artifact, its check)``."""
    options = ParityBenchmarkOptions(architecture="faster_rcnn", num_train=4, num_val=2,
                                     work_dir=str(work), **dict(dict(backbone_from="none"),
                                                                **options))
    root = parity.generate_data(options)
    params, prefix, check = parity.start_from(options, 0, root, str(work / "seed0"))
    return options, root, params, prefix, check


@pytest.fixture(scope="module")
def rcnn_start(tmp_path_factory):
    """The benchmark's start on its default data (the ``hard`` preset)."""
    return benchmark_start(tmp_path_factory.mktemp("rcnn"))


def test_both_sides_build_the_anchors_fitted_to_the_training_boxes(rcnn_start):
    # The default: anchors fitted to the generated boxes at the input, as zoo train
    # --fit-anchors fits them, in GluonCV's network and in the zoo's import alike (the
    # import's anchor check has compared the two).
    from zoo.data.factory import open_dataset
    from zoo.engine.health.census import box_sides
    from zoo.schema.anchors import best_possible_recall
    options, root, _, prefix, _ = rcnn_start
    assert options.anchors == "fitted"
    config = parity_rcnn.zoo_spec(parity.embedded_classes())
    ours = artifact.read_meta(prefix, 0)["config"]
    assert ours["anchor_scales"] != config["anchor_scales"]
    network = parity_rcnn.network_request(options)["rcnn"]
    assert (network["scales"], network["ratios"]) == (ours["anchor_scales"],
                                                       ours["anchor_ratios"])
    fitted, before = build_model(ours), build_model(ours, anchor_scales=config["anchor_scales"],
                                                    anchor_ratios=config["anchor_ratios"])
    sides = box_sides(open_dataset("voc", root, "train"), fitted.preprocessing())
    assert (best_possible_recall(sides, *fitted.anchor_maps())
            > best_possible_recall(sides, *before.anchor_maps()))


def test_the_sides_run_together_on_half_the_cores_each():
    from zoo_bench.options import PARITY_DEFAULTS
    cores = len(os.sched_getaffinity(0))
    together = ParityBenchmarkOptions(architecture="faster_rcnn", backbone_from="none")
    assert together.run_sides == PARITY_DEFAULTS["faster_rcnn"]["run_sides"] == "together"
    assert parity.side_environment(together)["OMP_NUM_THREADS"] == str(max(1, cores // 2))
    in_turn = ParityBenchmarkOptions(architecture="faster_rcnn", backbone_from="none",
                                     run_sides="in-turn")
    assert (parity.side_environment(in_turn).get("OMP_NUM_THREADS")
            == os.environ.get("OMP_NUM_THREADS"))


def test_the_imported_start_holds_gluoncvs_values_and_zero_background_rows(rcnn_start):
    # Every value of GluonCV's file, and the zeros the import adds (the RPN's background
    # logits, the box predictor's background rows) and nothing else.
    _, _, params, prefix, check = rcnn_start
    saved = mx.nd.load(params)
    theirs = sum(a.size for n, a in saved.items() if not n.endswith("anchors"))
    stored = artifact.load(prefix, 0)
    ours = np.concatenate([a.asnumpy().ravel() for a in list(stored.arg_params.values())
                           + list(stored.aux_params.values())])
    assert check["values"] == ours.size > theirs
    assert (ours == 0).sum() - sum((a.asnumpy() == 0).sum() for n, a in saved.items()
                                   if not n.endswith("anchors")) == ours.size - theirs


def test_both_sides_start_from_a_trained_trunk(tmp_path):
    # --backbone-from: the SSD's stride-8 trunk in GluonCV's file, at GluonCV's names, and in
    # the zoo's import of it; the rest of the network as GluonCV initialised it.
    source = demo_artifact(tmp_path / "demo")
    trunk = artifact.load(source, 0)
    trunk = {name: array for name, array in {**trunk.arg_params, **trunk.aux_params}.items()
             if name.startswith(("conv1", "block"))}
    _, _, params, prefix, check = benchmark_start(tmp_path / "work", backbone_from=source)
    assert check["backbone"] == "%s-0000: %d arrays" % (source, len(trunk))
    started = artifact.load(prefix, 0)
    started = {**started.arg_params, **started.aux_params}
    for name, array in trunk.items():
        np.testing.assert_array_equal(started[name].asnumpy(), array.asnumpy())
    theirs = mx.nd.load(params)
    np.testing.assert_array_equal(theirs["features.0.weight"].asnumpy(),
                                  trunk["conv1_weight"].asnumpy())
    # The blocks past the SSD's trunk (block 7's depthwise on) start as GluonCV drew them.
    _, _, _, fresh, _ = benchmark_start(tmp_path / "fresh")
    fresh = artifact.load(fresh, 0).arg_params
    np.testing.assert_array_equal(started["block10_expand_weight"].asnumpy(),
                                  fresh["block10_expand_weight"].asnumpy())
    assert not np.array_equal(started["conv1_weight"].asnumpy(),
                              fresh["conv1_weight"].asnumpy())


def step_check_network(root, params):
    """GluonCV's network of the step check (every anchor and proposal sampled) with the
    parameters ``params``, and its batch of the first training image."""
    image, label, fields = parity_rcnn.step_inputs(root)
    network = parity_rcnn.rcnn_network(parity_rcnn.zoo_spec(CLASSES_OF_DATA, **fields))
    return parity_rcnn.step_network(network, params, image, label)


def sorted_rows(array):
    return sorted(map(tuple, array.asnumpy().tolist()))


def test_gluoncvs_rcnn_sampler_is_drawn_to_take_every_roi_once(rcnn_start):
    # GluonCV's RCNNTargetSampler, asked for every proposal and ground truth, samples one
    # twice and leaves one out under most draws: the step check picks a draw under which the
    # network's own training pass samples each once, as the zoo's ProposalTarget does.
    _, root, params, _, _ = rcnn_start
    net, batch = step_check_network(root, params)
    data, gt_box = batch[0], batch[1][:, :, :4]
    with mx.autograd.train_mode():
        rpn_score, rpn_box = net.rpn(mx.nd.zeros_like(data), net.features(data))[:2]
    candidates = sorted_rows(mx.nd.concat(rpn_box[0], gt_box[0], dim=0))

    def sampled(seed):
        mx.random.seed(seed)
        with mx.autograd.train_mode():
            return sorted_rows(net.sampler(rpn_box, rpn_score, gt_box)[0][0])
    assert sum(sampled(seed) != candidates for seed in range(10)) >= 5
    seed = parity_rcnn.every_roi_draw(net, batch)
    mx.random.seed(seed)
    with mx.autograd.record():
        outputs = net(data, gt_box, batch[1][:, :, 4:5])
    assert sorted_rows(outputs[2][0]) == candidates


@pytest.mark.slow  # about 30 s: R-CNN on every anchor's proposal, both sides
def test_the_first_steps_on_one_image_are_gluoncvs(rcnn_start):
    options, root, params, prefix, _ = rcnn_start
    check = parity_rcnn.step_check(options, root, params, prefix)
    assert check["equal"], check
    assert check["first_step"] < parity_rcnn.FIRST_STEP_TOLERANCE
    first, last = check["steps"][0], check["steps"][-1]
    assert last[2] < first[2] and last[6] < first[6]  # both sides learn, not only agree


@pytest.mark.slow  # about 30 s
def test_a_changed_zoo_labelling_fails_the_step_check(rcnn_start, tmp_path):
    # Anchors overlapping a box by 0.1-0.3 ignored rather than negative: the zoo's first
    # step already differs.
    options, root, params, _, _ = rcnn_start
    net = parity_rcnn.gluon_faster_rcnn(parity_rcnn.network_request(options), CLASSES_OF_DATA)
    net.load_parameters(params)
    prefix = parity_rcnn.import_gluon(net, str(tmp_path / "rcnn"), params,
                                      **parity_rcnn.size_fields(options), rpn_negative_iou=0.1)
    check = parity_rcnn.step_check(options, root, params, prefix)
    assert not check["equal"] and check["first_step"] > 100 * parity_rcnn.FIRST_STEP_TOLERANCE


@pytest.mark.slow  # about 30 s
def test_a_scaled_rpn_box_gradient_fails_the_step_check_at_its_second_step(tmp_path,
                                                                          monkeypatch):
    # A broken zoo whose losses are right but whose RPN box gradient is a quarter of
    # GluonCV's: its first step agrees, its update does not (on the shapes preset's first
    # image, whose second step's R-CNN box term the trunk's update moves most).
    import symbols.layers
    import symbols.rpn
    options, root, params, prefix, _ = benchmark_start(tmp_path, preset="shapes")
    real = symbols.layers.smooth_l1_loss

    def quarter_rpn_box(pred, target, weight, name, sigma, grad_scale):
        scale = 0.25 if name == "rpn_bbox" else 1.0
        return real(pred, target, weight, name, sigma, grad_scale * scale)
    monkeypatch.setattr(symbols.rpn, "smooth_l1_loss", quarter_rpn_box)
    check = parity_rcnn.step_check(options, root, params, prefix)
    assert check["first_step"] < parity_rcnn.FIRST_STEP_TOLERANCE
    assert not check["equal"] and check["worst"] > 10 * parity_rcnn.STEP_CHECK_TOLERANCE


@pytest.mark.slow
def test_a_short_run_through_the_command_line(tmp_path, capsys, monkeypatch):
    # One seed, one epoch on a few images, the zoo's recipe changed: every piece runs as the
    # documented command runs it (progress on, the trunk of make demo's detector), the outputs
    # hold what the verdict says.
    monkeypatch.chdir(tmp_path)
    demo_artifact(tmp_path)
    work = str(tmp_path / "parity")
    code = main(["benchmark-parity", "--architecture", "faster_rcnn", "--seeds", "2",
                 "--epochs", "1", "--num-train", "8", "--num-val", "4",
                 "--zoo-config", "rcnn_fg_fraction=0.75", "--work-dir", work])
    out = capsys.readouterr().out
    with open(os.path.join(work, "parity_faster_rcnn.json")) as f:
        saved = json.load(f)
    assert code == (0 if saved["verdict"]["passed"] else 1)
    assert saved["verdict"]["line"] in out
    assert saved["verdict"]["line"].startswith("parity faster_rcnn: zoo ")
    assert [run["side"] for run in saved["runs"]] == ["zoo", "gluoncv"]
    assert all(len(run["epochs"]) == 1 and run["seed"] == 2 for run in saved["runs"])
    assert saved["start_checks"][0]["step_check"]["first_step"] < 1e-3
    assert saved["start_checks"][0]["backbone"].startswith(os.path.join(
        "output", "train", "ssd_mobilenetv2_stride8-0000: "))
    assert "(its backbone from output" in out
    assert os.path.getsize(os.path.join(work, "parity_faster_rcnn.png")) > 5000
    # The zoo's side trained the changed recipe; GluonCV's epochs were scored without it.
    zoo_start = artifact.read_meta(os.path.join(work, "faster_rcnn_seed2", "init", "rcnn"), 0)
    assert zoo_start["config"]["rcnn_fg_fraction"] == 0.75
    theirs = artifact.read_meta(os.path.join(work, "faster_rcnn_seed2", "gluoncv", "epoch1",
                                             "faster_rcnn"), 0)
    assert theirs["config"]["rcnn_fg_fraction"] == 0.5


def test_gluoncvs_network_trains_at_a_short_side_of_128():
    # A square image of 128 pixels has 960 anchors, fewer than the 2000 proposals GluonCV's
    # RPN keeps in training by default, which it slices off them: the benchmark keeps as
    # many as there are, on both sides.
    from zoo_bench.gluoncv_recipes import FasterRCNNLosses
    options = ParityBenchmarkOptions(architecture="faster_rcnn", data_shape=128,
                                     backbone_from="none")
    network = parity_rcnn.network_request(options)
    net = parity_rcnn.initialised_rcnn(network, CLASSES_OF_DATA)
    image = mx.nd.array(np.random.RandomState(0).randint(0, 256, (128, 128, 3)), dtype="uint8")
    label = np.array([[10, 20, 60, 70, 0, 0], [70, 40, 120, 100, 2, 0]], np.float32)
    batch = parity_rcnn.gluoncv_batch(net, network, image, label)
    with mx.autograd.record():
        terms, _ = FasterRCNNLosses(net)(*batch)
    assert all(np.isfinite(term.asnumpy()).all() for term in terms)
    zoo = parity_rcnn.zoo_spec(CLASSES_OF_DATA, **parity_rcnn.size_fields(options))
    assert zoo["rpn_post_nms_top_n_train"] == network["rcnn"]["rpn_train_post_nms"] == 960


def test_the_zoos_side_augments_as_gluoncvs_scripts(tmp_path):
    # GluonCV's FasterRCNNDefaultTrainTransform flips and resizes: the zoo's side trains
    # without its colour jitter; SSD's transforms both jitter colours.
    def zoo_side(architecture):
        options = ParityBenchmarkOptions(architecture=architecture, backbone_from="none")
        return parity.zoo_train_options(options, 0, str(tmp_path), "init", str(tmp_path))
    assert zoo_side("faster_rcnn").colour_jitter is False
    assert zoo_side("ssd").colour_jitter is True
