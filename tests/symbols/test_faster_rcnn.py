"""Faster R-CNN: the proposal graph agrees with a numpy reference, target assignment,
validation, inference and training on every backbone at a small input."""
import mxnet as mx
import numpy as np
import pytest

import zoo
from symbols.boxes import iou
from symbols.box_coder import base_anchors, decode, encode, grid_anchors
from symbols.rpn import AnchorLevel, LevelOutput, ProposalSettings, proposals
from symbols.layers import StrictNameManager
from symbols.rcnn_targets import ProposalTarget, RPNTarget, ground_truth

from conftest import graph_runs

RCNN_MODELS = sorted(name for name in zoo.list_models() if name.startswith("faster_rcnn_"))
SMALL = dict(data_shape=160, max_size=224, num_classes=3, rpn_pre_nms_top_n_test=400,
             rpn_post_nms_top_n_test=50, rpn_pre_nms_top_n_train=1000,
             rpn_post_nms_top_n_train=200, rcnn_batch_rois=16, rpn_batch_size=64, roi_size=[8, 8])


def fixed_batch():
    data = np.random.RandomState(0).uniform(-1, 1, (1, 3, 160, 224)).astype("float32")
    im_info = np.array([[150, 200, 1.0]], "float32")
    label = np.full((1, 4, 6), -1, "float32")
    label[0, 0] = [0, 0.1, 0.1, 0.5, 0.6, 0]
    label[0, 1] = [2, 0.4, 0.3, 0.95, 0.9, 0]
    return data, im_info, label


def softmax_object(logits):
    """Object probabilities ``(A*H*W,)`` of RPN logits ``(2A, H, W)``."""
    pair = logits.reshape(2, -1)
    return (np.exp(pair) / np.exp(pair).sum(axis=0))[1]


def greedy_nms(scores, boxes, threshold):
    """Indices of the boxes greedy NMS keeps, best first (scores below 0 are dropped)."""
    kept = []
    for i in np.argsort(-scores, kind="stable"):
        if scores[i] < 0:
            break
        if not kept or iou(boxes[i:i + 1], boxes[kept]).max() <= threshold:
            kept.append(i)
    return kept


def reference_level(logits, deltas, image, anchors, settings):
    """One level's survivors, best first: its top-k anchors decoded, clipped, small ones
    dropped, NMS."""
    count = anchors.num_anchors
    height, width = logits.shape[1:]
    grid = grid_anchors(anchors.stride, anchors.scales, anchors.ratios, height, width)
    scores = softmax_object(logits)
    boxes = deltas.reshape(count, 4, height, width).transpose(0, 2, 3, 1).reshape(-1, 4)
    order = np.argsort(-scores, kind="stable")[:settings.pre_nms_top_n]
    scores, boxes = scores[order], decode(grid[order], boxes[order])
    h, w, scale = image
    boxes = np.minimum(np.maximum(boxes, 0), [w, h, w, h])
    side = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    scores = np.where(side >= settings.min_size * scale, scores, -1)
    kept = greedy_nms(scores, boxes, settings.nms_threshold)
    return scores[kept], boxes[kept]


def reference_proposals(levels, im_info, settings):
    """Straightforward numpy proposals: per level top-k, decode, clip, minimum size, greedy
    NMS; then the post-NMS top-k of all levels, rows filled with the best proposal (the whole
    image if none). ``levels``: ``(logits (B, 2A, H, W), deltas (B, 4A, H, W), anchors)``."""
    out = []
    for b in range(len(im_info)):
        parts = [reference_level(logits[b], deltas[b], im_info[b], anchors, settings)
                 for logits, deltas, anchors in levels]
        scores = np.concatenate([p[0] for p in parts])
        boxes = np.concatenate([p[1] for p in parts])
        h, w, _ = im_info[b]
        post = settings.post_nms_top_n
        best = np.argsort(-scores, kind="stable")[:post]
        boxes = boxes[best] if len(best) else np.array([[0, 0, w, h]])
        boxes = np.concatenate([boxes, boxes[:1].repeat(post - len(boxes), 0)])
        out.append(np.concatenate([np.full((len(boxes), 1), b), boxes], axis=1))
    return np.concatenate(out).astype(np.float32)


LEVELS = {"c4": [AnchorLevel("c4", 16, (2, 4), (0.5, 1, 2))],
          "fpn": [AnchorLevel("p3", 8, (4,), (0.5, 1, 2)),
                  AnchorLevel("p4", 16, (4,), (0.5, 1, 2))]}


@pytest.mark.parametrize("levels", sorted(LEVELS))
@pytest.mark.parametrize("pre,post", [(60, 20), (500, 100)])
def test_proposals_match_numpy_reference(levels, pre, post):
    """On random RPN outputs for an 8x10 (and 4x5) map: same boxes in the same order; (500,
    100) asks for more anchors than a map has and more proposals than survive NMS."""
    settings = ProposalSettings(pre, post, 0.7, 16)
    rng = np.random.RandomState(0)
    arrays, symbols, inputs = [], [], {"im_info": np.array([[60, 70, 1.0], [64, 80, 0.8]])}
    for anchors in LEVELS[levels]:
        height, width, count = 64 // anchors.stride, 80 // anchors.stride, anchors.num_anchors
        logits = rng.normal(0, 2, (2, 2 * count, height, width))
        deltas = rng.normal(0, 0.5, (2, 4 * count, height, width))
        arrays.append((logits, deltas, anchors))
        names = ["%s_%s" % (part, anchors.tag) for part in ("feature", "score", "deltas")]
        inputs.update(zip(names, (np.zeros((2, 8, height, width)), logits, deltas)))
        symbols.append(LevelOutput(anchors, *(mx.sym.Variable(n) for n in names)))
    with StrictNameManager():
        graph = proposals(symbols, mx.sym.Variable("im_info"), settings)
    rois = graph.bind(mx.cpu(), {k: mx.nd.array(v, dtype="float32")
                                 for k, v in inputs.items()}).forward()[0].asnumpy()
    expected = reference_proposals(arrays, inputs["im_info"], settings)
    assert rois.shape == (2 * post, 5)
    np.testing.assert_allclose(rois, expected, atol=1e-4)


@pytest.mark.parametrize("levels", [[(16, [2, 4, 8], [0.5, 1, 2])],
                                    [(8, [4], [0.5, 1, 2]), (16, [4], [0.5, 1, 2]),
                                     (32, [4], [0.5, 1, 2])]])
def test_rpn_targets_label_overlapping_anchors(levels):
    """One level (C4) or three (FPN): anchors of every level labelled and sampled together."""
    op = RPNTarget([(stride, base_anchors(stride, scales, ratios)) for stride, scales, ratios
                    in levels], batch_size=64, fg_fraction=0.5, positive_iou=0.7,
                   negative_iou=0.3)
    _, im_info, label = fixed_batch()
    im_info[:] = [160, 224, 1]
    scores = [mx.nd.zeros((1, 2 * len(scales) * len(ratios), 160 // stride, 224 // stride))
              for stride, scales, ratios in levels]
    anchors = op.anchors([s.asnumpy() for s in scores])
    count = len(anchors)
    out = [mx.nd.zeros(s) for s in [(1, count), (1, count, 4), (1, count, 4)]]
    np.random.seed(0)
    op.forward(True, ["write"] * 3, scores + [mx.nd.array(label), mx.nd.array(im_info)], out, [])
    labels, targets, weights = (o.asnumpy()[0] for o in out)
    gt = label[0, :2, 1:5] * [224, 160, 224, 160]
    overlaps = iou(anchors, gt)
    inside = (anchors[:, :2] >= 0).all(1) & (anchors[:, 2] <= 224) & (anchors[:, 3] <= 160)
    best_for_a_gt = (overlaps == overlaps[inside].max(axis=0)).any(axis=1) & inside
    positive = labels == 1
    assert 0 < positive.sum() <= 32 and (labels >= 0).sum() <= 64
    assert ((overlaps.max(axis=1) >= 0.7) | best_for_a_gt)[positive].all()
    assert (overlaps.max(axis=1)[labels == 0] < 0.3).all() and inside[labels >= 0].all()
    assert np.array_equal(weights[:, 0] > 0, positive)
    matched = gt[iou(anchors[positive], gt).argmax(axis=1)]
    np.testing.assert_allclose(targets[positive], encode(anchors[positive], matched), atol=1e-5)


def sampled_proposals(boxes, seed=0):
    """``ProposalTarget``'s 32 ROIs (a quarter foreground at IoU 0.5) of one image of
    :func:`fixed_batch` among ``boxes`` ``(N, 4)`` in pixels: ``(rois, classes, box targets,
    box weights)`` as arrays, and the image's ``(im_info, label)``."""
    op = ProposalTarget(num_classes=3, batch_rois=32, fg_fraction=0.25, fg_iou=0.5,
                        box_stds=[0.1, 0.1, 0.2, 0.2])
    _, im_info, label = fixed_batch()
    rois = np.concatenate([np.zeros((len(boxes), 1)), boxes], axis=1).astype("float32")
    out = [mx.nd.zeros(s) for s in [(32, 5), (32,), (32, 16), (32, 16)]]
    np.random.seed(seed)
    op.forward(True, ["write"] * 4, [mx.nd.array(rois), mx.nd.array(label),
                                     mx.nd.array(im_info)], out, [])
    return [o.asnumpy() for o in out], (im_info, label)


def random_boxes(count, seed):
    rng = np.random.RandomState(seed)
    corners = rng.uniform(0, 140, (count, 2))
    return np.concatenate([corners, corners + rng.uniform(5, 60, (count, 2))], axis=1)


def test_proposal_targets_sample_foreground_and_background():
    (sampled, classes, targets, weights), _ = sampled_proposals(random_boxes(100, 1))
    assert 1 <= (classes > 0).sum() <= 8
    assert set(np.unique(classes)) <= {0, 1, 3}
    for row, cls in enumerate(classes.astype(int)):
        assert weights[row].sum() == (4 if cls else 0)
        assert weights[row, 4 * cls:4 * cls + 4].sum() == (4 if cls else 0)
    assert (sampled[:, 0] == 0).all()


def test_proposal_targets_never_sample_the_rows_nms_left_empty():
    # GluonCV's convention keeps NMS's empty rows as [-1, -1, -1, -1] (its sampler ignores
    # them by their score -1): 10 proposals and 290 such rows must give ROIs of the 10 and
    # the ground truths only, however many negatives the sample asks for.
    real = random_boxes(10, 2)
    (sampled, _, _, _), (im_info, label) = sampled_proposals(
        np.concatenate([real, np.full((290, 4), -1.0)]))
    sampled = sampled[:, 1:]
    assert not (sampled == -1).all(axis=1).any()
    candidates = np.concatenate([real, ground_truth(label[0], im_info[0])[0]]).astype("float32")
    assert all((np.abs(candidates - box).max(axis=1) < 1e-3).any() for box in sampled)


@pytest.mark.parametrize("field,value,expected", [
    ("rpn_feature", "stage3_unit3_relu", "deepest layer"),
    ("rpn_feature", "res5", "rpn_stride = 16"),
    ("head_stage", "res4", "continues from the RPN feature"),
    ("rpn_post_nms_top_n_test", 10000, "at most rpn_pre_nms_top_n_test"),
    ("rpn_negative_iou", 0.8, "below rpn_positive_iou"),
    ("roi_size", [14], "[height, width]"),
    ("max_size", 500, "at least data_shape"),
])
def test_bad_rcnn_configs_raise(field, value, expected):
    with pytest.raises(zoo.ConfigError) as err:
        zoo.get_model("faster_rcnn_resnet101", **{field: value})
    assert err.value.field == field and expected in str(err.value)


@pytest.mark.parametrize("name", graph_runs(RCNN_MODELS))
def test_inference_gives_detections(name):
    model = zoo.get_model(name, **SMALL)
    args, aux = model.init_params(seed=0)
    # Untrained deep backbones reach activations of ~1e4, so random RPN deltas would throw
    # every proposal off the image; zero deltas make the proposals the anchors themselves.
    args["rpn_bbox_pred_weight"][:] = 0
    args["rpn_bbox_pred_bias"][:] = 0
    # Their box head's features reach ~1e6 too, which saturates the class softmax into one
    # class for every ROI (background for some seeds): class scores from the biases alone.
    args["rcnn_cls_score_weight"][:] = 0
    args["rcnn_cls_score_bias"][:] = mx.nd.array(np.random.RandomState(0).normal(size=4))
    data, im_info, _ = fixed_batch()
    inputs = dict(args, data=mx.nd.array(data), im_info=mx.nd.array(im_info))
    det = model.symbol().bind(mx.cpu(), inputs, aux_states=aux, grad_req="null").forward()[0]
    det = det.asnumpy()
    assert det.shape == (1, 100, 6)
    kept = det[0][det[0, :, 0] >= 0]
    assert len(kept) > 0
    assert set(kept[:, 0]) <= {0, 1, 2}
    assert (np.diff(kept[:, 1]) <= 1e-6).all()
    if model.spec["clip_detections"]:  # GluonCV's models leave boxes unclipped
        assert ((kept[:, 2:] >= 0) & (kept[:, 2:] <= 1)).all()
    assert (kept[:, 4] >= kept[:, 2]).all() and (kept[:, 5] >= kept[:, 3]).all()


def bind_training(name):
    model = zoo.get_model(name, **SMALL)
    args, aux = model.init_params(seed=0)
    data, im_info, label = fixed_batch()
    arrays = dict(args, data=mx.nd.array(data), im_info=mx.nd.array(im_info),
                  label=mx.nd.array(label))
    grads = {k: mx.nd.zeros_like(v) for k, v in args.items()}
    executor = model.train_symbol().bind(mx.cpu(), arrays, args_grad=grads, aux_states=aux)
    return model, executor, args, grads


@pytest.mark.parametrize("name", graph_runs(RCNN_MODELS))
def test_training_step_reaches_every_layer(name):
    model, executor, args, grads = bind_training(name)
    np.random.seed(0)
    losses = sum(model.training_losses(executor.forward(is_train=True)).values())
    executor.backward()
    assert np.isfinite(losses)
    assert all(np.isfinite(g.asnumpy()).all() for g in grads.values())
    first_conv = min((k for k in grads if k.endswith("_weight")), key=list(args).index)
    for key in (first_conv, "rpn_cls_score_weight", "rcnn_cls_score_weight",
                "rcnn_bbox_pred_weight"):
        assert np.abs(grads[key].asnumpy()).sum() > 0, key


def learns_fixed_batch(name, steps=24, optimizer=None):
    """Loss over ``steps`` steps of ``optimizer`` (default SGD, lr 0.005, momentum 0.9) on
    one batch; target sampling re-seeded each step."""
    model, executor, args, grads = bind_training(name)
    updater = mx.optimizer.get_updater(
        optimizer or mx.optimizer.SGD(learning_rate=0.005, momentum=0.9))
    losses = []
    for _ in range(steps):
        np.random.seed(0)
        losses.append(sum(model.training_losses(executor.forward(is_train=True)).values()))
        executor.backward()
        for i, key in enumerate(sorted(grads)):
            updater(i, grads[key], args[key])
    return losses


def test_training_learns_a_fixed_batch():
    losses = learns_fixed_batch("faster_rcnn_mobilenetv2", steps=32)
    assert np.mean(losses[-4:]) < 0.6 * np.mean(losses[:4]), losses


@pytest.mark.slow
@pytest.mark.parametrize("name", RCNN_MODELS)
def test_every_model_learns_a_fixed_batch(name):
    """From random weights a deep backbone's features grow to ~1e2 through the FPN and to
    ~1e3 through its fc head (its BN statistics are not calibrated), which SGD's steps
    cannot follow; Adam's steps do not depend on that scale."""
    losses = learns_fixed_batch(name, steps=40, optimizer=mx.optimizer.Adam(learning_rate=1e-4))
    assert np.mean(losses[-4:]) < 0.7 * np.mean(losses[:4]), losses
