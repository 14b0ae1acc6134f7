"""Training and validation transforms: box invariants, flips, crops, reproducibility."""
import cv2
import numpy as np
import pytest

from zoo.data import MEAN_PIXELS, STD_PIXELS, TrainTransform, ValTransform, VOCDataset, embedded
from symbols.boxes import iou as box_iou
from zoo.data import inference_transform
from zoo.data.transforms import (MIN_IOUS, NO_LABEL, centres_inside, jitter_colour, normalise,
                                 resize_image, sample_crop)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Eight (image, label) items of 160-pixel shape images."""
    root = embedded.generate(str(tmp_path_factory.mktemp("data") / "shapes"), seed=1,
                             num_train=8, num_val=1, image_size=160)
    dataset = VOCDataset(root, "train")
    return [dataset[i] for i in range(len(dataset))]


def test_val_transform_resizes_and_normalises():
    image = np.tile(np.array(MEAN_PIXELS, dtype=np.float32).round().astype(np.uint8), (50, 80, 1))
    label = np.array([[2, 8, 5, 40, 45, 1]], dtype=np.float32)
    data, out = ValTransform(64)(image, label)
    assert data.shape == (3, 64, 64) and data.dtype == np.float32
    expected = (np.round(MEAN_PIXELS) - np.array(MEAN_PIXELS)) / np.array(STD_PIXELS)
    np.testing.assert_allclose(data[:, 10, 10], expected, atol=1e-5)
    np.testing.assert_allclose(out, [[2, 0.1, 0.1, 0.5, 0.9, 1]], atol=1e-6)



def opencv_resize(image, size, method):
    """``cv2.resize`` to ``size`` ``(height, width)`` without IPP, as MXNet's OpenCV runs."""
    used = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        return cv2.resize(image, (size[1], size[0]), interpolation=method)
    finally:
        cv2.ipp.setUseIPP(used)


@pytest.mark.parametrize("shape, method", [
    ((100, 120), cv2.INTER_AREA),    # both sides shrink
    ((30, 40), cv2.INTER_CUBIC),     # both grow
    ((50, 80), cv2.INTER_LINEAR),    # one grows, one shrinks
    ((64, 90), cv2.INTER_LINEAR)])   # one stays
def test_auto_interpolation_resizes_as_mxnets_interp_9(shape, method):
    image = np.random.RandomState(0).randint(0, 256, shape + (3,), dtype=np.uint8)
    label = np.array([[2, 8, 5, 20, 25, 0]], dtype=np.float32)
    statistics = dict(mean=list(MEAN_PIXELS), std=list(STD_PIXELS), data_shape=[64, 64])
    used = cv2.ipp.useIPP()
    data, out = inference_transform(dict(statistics, interpolation="auto"))(image, label)
    expected = normalise(opencv_resize(image, (64, 64), method), MEAN_PIXELS, STD_PIXELS)
    np.testing.assert_array_equal(data, expected)
    np.testing.assert_array_equal(out, ValTransform(64)(image, label)[1])  # the same map
    assert cv2.ipp.useIPP() == used, "IPP is switched back as it was"


def test_without_an_interpolation_inference_warps_as_before():
    image = np.random.RandomState(0).randint(0, 256, (50, 80, 3), dtype=np.uint8)
    statistics = dict(mean=list(MEAN_PIXELS), std=list(STD_PIXELS), data_shape=[64, 64])
    warped = inference_transform(statistics)(image, NO_LABEL)[0]
    np.testing.assert_array_equal(warped, ValTransform(64)(image, NO_LABEL)[0])
    np.testing.assert_array_equal(
        warped, inference_transform(dict(statistics, interpolation="warp"))(image, NO_LABEL)[0])
    resized = inference_transform(dict(statistics, interpolation="bilinear"))(image, NO_LABEL)[0]
    np.testing.assert_array_equal(resized, normalise(resize_image(image, (64, 64), "bilinear"),
                                                     MEAN_PIXELS, STD_PIXELS))
    assert np.abs(resized - warped).max() > 0.1, "the warp's border blends in the mean pixel"


def test_an_unknown_interpolation_is_one_line_naming_it():
    with pytest.raises(ValueError, match="^preprocessing interpolation = 'lanczos': expected "
                                         "one of warp, bilinear, bicubic, auto$"):
        inference_transform(dict(mean=list(MEAN_PIXELS), std=list(STD_PIXELS),
                                 data_shape=[64, 64], interpolation="lanczos"))


def test_train_boxes_stay_valid_and_inside(samples):
    transform = TrainTransform(96)
    for seed in range(150):
        image, label = samples[seed % len(samples)]
        data, out = transform(image, label, np.random.RandomState(seed))
        assert data.shape == (3, 96, 96) and data.dtype == np.float32 and out.dtype == np.float32
        assert 1 <= len(out) <= len(label)
        boxes = out[:, 1:5]
        assert np.all((boxes >= 0) & (boxes <= 1))
        assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1])
        assert set(out[:, 0]) <= set(label[:, 0]) and set(out[:, 5]) <= {0, 1}


def test_train_transform_is_reproducible(samples):
    image, label = samples[0]
    transform = TrainTransform(96)
    first = transform(image, label, np.random.RandomState(7))
    again = transform(image, label, np.random.RandomState(7))
    other = transform(image, label, np.random.RandomState(8))
    for ours, theirs in zip(first, again):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.array_equal(first[0], other[0])


def test_flip_mirrors_image_and_boxes(samples):
    image, label = samples[1]
    plain = TrainTransform(96, max_expand=1, min_ious=(None,), flip=False, colour=False)
    flipping = TrainTransform(96, max_expand=1, min_ious=(None,), colour=False)
    reference, reference_label = plain(image, label, np.random.RandomState(0))
    flips = 0
    for seed in range(10):
        data, out = flipping(image, label, np.random.RandomState(seed))
        if np.allclose(data, reference, atol=1e-4):
            np.testing.assert_allclose(out, reference_label)
            continue
        flips += 1
        np.testing.assert_allclose(data, reference[:, :, ::-1], atol=0.05)
        np.testing.assert_allclose(out[:, [1, 3]], 1 - reference_label[:, [3, 1]], atol=1e-6)
        np.testing.assert_allclose(out[:, [0, 2, 4, 5]], reference_label[:, [0, 2, 4, 5]])
    assert 0 < flips < 10


def test_expansion_zooms_out_onto_the_mean_pixel(samples):
    image, label = samples[2]
    expanding = TrainTransform(96, max_expand=4, min_ious=(None,), flip=False, colour=False)
    ratios = []
    for seed in range(20):
        data, out = expanding(image, label, np.random.RandomState(seed))
        original = label[:, 3] - label[:, 1]
        ratios.append(np.max(original / image.shape[1] / (out[:, 3] - out[:, 1])))
        if ratios[-1] > 1.5:
            # the mean pixel (rounded to uint8), normalised
            assert np.mean(np.all(np.abs(data) < 0.01, axis=0)) > 0.3
    assert min(ratios) == pytest.approx(1, abs=1e-3) and 1.5 < max(ratios) <= 4.001


def test_crop_satisfies_its_iou_constraint():
    rng = np.random.RandomState(0)
    cropped = 0
    for _ in range(300):
        corners = rng.uniform(0, 300, size=(3, 2))
        boxes = np.hstack([corners, corners + rng.uniform(20, 150, size=(3, 2))])
        window = sample_crop((450, 450), boxes, MIN_IOUS, rng)
        if np.allclose(window, [0, 0, 450, 450]):
            continue
        cropped += 1
        kept = centres_inside(boxes, window)
        assert kept.any()
        assert box_iou(window[None], boxes[kept]).max() >= 0.1 - 1e-9
    assert cropped > 150
    large = np.array([[60.0, 80.0, 400.0, 420.0]])
    for threshold in (0.3, 0.5, 0.7, 0.9):
        windows = [sample_crop((450, 450), large, (threshold,), rng) for _ in range(20)]
        crops = [w for w in windows if not np.allclose(w, [0, 0, 450, 450])]
        assert len(crops) >= (10 if threshold < 0.9 else 0)
        for window in crops:
            assert centres_inside(large, window)[0]
            assert box_iou(window[None], large)[0, 0] >= threshold


def test_colour_jitter_stays_in_range():
    rng = np.random.RandomState(3)
    image = rng.uniform(0, 255, size=(40, 40, 3)).astype(np.float32)
    changed = 0
    for seed in range(20):
        out = jitter_colour(image.copy(), np.random.RandomState(seed))
        assert out.dtype == np.float32 and out.min() >= 0 and out.max() <= 255
        changed += not np.allclose(out, image, atol=1e-3)
    assert changed >= 15


def reference_jitter(image, rng):
    """SSD's photometric distortion written plainly in float32, every step on every pixel:
    the specification the table- and matrix-based jitter_colour must match."""
    image = image.astype(np.float32)
    if rng.uniform() < 0.5:
        image += rng.uniform(-32, 32)
    contrast_first = rng.uniform() < 0.5
    contrast = rng.uniform(0.5, 1.5) if rng.uniform() < 0.5 else 1.0
    saturation = rng.uniform(0.5, 1.5) if rng.uniform() < 0.5 else 1.0
    hue = rng.uniform(-18, 18) if rng.uniform() < 0.5 else 0.0
    if contrast_first:
        image *= contrast
    hsv = cv2.cvtColor(np.clip(image, 0, 255) / 255, cv2.COLOR_RGB2HSV)
    hsv[:, :, 1] = np.clip(hsv[:, :, 1] * saturation, 0, 1)
    hsv[:, :, 0] = (hsv[:, :, 0] + hue) % 360
    image = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB) * 255
    return image if contrast_first else np.clip(image * contrast, 0, 255)


def test_colour_jitter_matches_the_plain_float_steps():
    image = np.random.RandomState(4).randint(0, 256, size=(32, 40, 3)).astype(np.uint8)
    for seed in range(100):  # every branch: with and without HSV, each clip, hue wrapping
        expected = reference_jitter(image, np.random.RandomState(seed))
        from_uint8 = jitter_colour(image, np.random.RandomState(seed))
        from_float = jitter_colour(image.astype(np.float32), np.random.RandomState(seed))
        assert from_uint8.dtype == np.float32 and from_uint8.shape == image.shape
        np.testing.assert_allclose(from_uint8, expected, atol=0.01)
        np.testing.assert_allclose(from_float, from_uint8, atol=1e-3)
