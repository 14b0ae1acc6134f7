"""Large photos are decoded at the size the network needs: a JPEG much larger than the input
is decoded by libjpeg's DCT scaling (1/2, 1/4 or 1/8), its EXIF orientation kept, and the
boxes come back in the whole photo's pixels; PNGs with alpha and damaged files are handled
as before."""
import json
import os

import numpy as np
import pytest
from PIL import Image

import zoo
from zoo.cli import main
from zoo.data.images import dct_factor, decode_reduced
from zoo.data.orientation import orient
from zoo.inference.runner import BatchDetector, ImageList, ReducedImage
from zoo.schema.preprocessing import MEAN_PIXELS, STD_PIXELS, short_side, stretch

STORED = (3000, 4000)
"""(height, width) of the photo as stored; shown turned (orientation 6) as 4000 x 3000."""
BRIGHT = (1200, 700, 1900, 1100)
"""x1, y1, x2, y2 of the bright rectangle in the stored pixels."""
SPEC = {"mean_pixels": MEAN_PIXELS, "std_pixels": STD_PIXELS, "data_shape": 600,
        "max_size": 1000}


def photo_pixels():
    """Dark, with one bright rectangle and a gentle gradient (so that JPEG has work)."""
    height, width = STORED
    image = np.zeros((height, width, 3), np.uint8)
    image[:, :, 2] = (np.arange(width) * 60 // width).astype(np.uint8)[None, :]
    x1, y1, x2, y2 = BRIGHT
    image[y1:y2, x1:x2] = 230
    return image


def save_jpeg(path, pixels, orientation=1):
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, quality=92, exif=exif.tobytes())
    return str(path)


@pytest.fixture(scope="module")
def turned_photo(tmp_path_factory):
    """A 4000x3000 JPEG stored landscape with EXIF orientation 6 (shown portrait)."""
    return save_jpeg(tmp_path_factory.mktemp("big") / "turned.jpg", photo_pixels(), 6)


def displayed_bright_box():
    """The bright rectangle's corners in the displayed (turned) photo's pixels."""
    mask = np.zeros(STORED + (3,), np.uint8)
    x1, y1, x2, y2 = BRIGHT
    mask[y1:y2, x1:x2] = 1
    ys, xs = np.nonzero(orient(mask, 6)[:, :, 0])
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)


class BrightBox(BatchDetector):
    """A detector whose 'network' finds the one bright rectangle: the box of the pixels
    above the mean in each image's valid region, normalised to it, as a graph's rows are."""

    def __init__(self, preprocessing):
        super().__init__(["bright"], preprocessing)

    def engine(self):
        return self

    def launch(self, data, im_info):
        self.im_info = im_info
        rows = []
        for slot, image in enumerate(data):
            height, width = (image.shape[1:] if im_info is None
                             else im_info[slot, :2].astype(int))
            ys, xs = np.nonzero(image[:, :height, :width].mean(axis=0) > 0.5)
            rows.append([[0, 1.0, xs.min() / width, ys.min() / height, (xs.max() + 1) / width,
                          (ys.max() + 1) / height]])
        return np.array(rows, np.float32)

    def fetch(self, rows):
        return rows


def test_the_factor_is_the_largest_that_keeps_the_size_needed():
    assert dct_factor(4000, 3000, (1000, 750)) == 4
    assert dct_factor(4000, 3000, (1001, 750)) == 2  # 1/4 would give 1000
    assert dct_factor(4000, 3000, (128, 128)) == 8
    assert dct_factor(4000, 3000, (2001, 1500)) == 1
    assert dct_factor(600, 400, (600, 400)) == 1


@pytest.mark.parametrize("preprocessing, factor", [
    (short_side(SPEC, 32), 4),                   # 600 x 800 of 3000 x 4000: 750 x 1000
    (stretch(dict(SPEC, data_shape=300)), 8),    # 300 x 300: 375 x 500
])
def test_boxes_are_in_the_whole_photos_pixels(turned_photo, preprocessing, factor):
    """The DCT-reduced photo (turned as its EXIF says) gives the box the whole decoded photo
    gives, in the whole photo's pixels, and im_info's scale is the whole photo's."""
    detector = BrightBox(preprocessing)
    source = ImageList([turned_photo], decode_for=detector.preprocessing)
    reduced = source.load(0)
    assert isinstance(reduced, ReducedImage) and reduced.factor == factor
    assert reduced.size == (3000, 4000) and reduced.pixels.shape == (4000 // factor,
                                                                     3000 // factor, 3)
    whole = np.asarray(Image.open(turned_photo).convert("RGB").rotate(-90, expand=True))
    from_whole = detector(whole)
    whole_info = detector.im_info
    from_reduced = detector(turned_photo)
    truth = displayed_bright_box()
    network_pixel = 4000 / max(detector.transform.data_shape, 1000 * (factor == 4))
    assert np.abs(from_reduced.boxes[0] - from_whole.boxes[0]).max() <= 2 * network_pixel
    assert np.abs(from_reduced.boxes[0] - truth).max() <= 3 * network_pixel, \
        (from_reduced.boxes, truth)
    if whole_info is not None:  # a Faster R-CNN's scale: the RPN's least box in photo pixels
        np.testing.assert_allclose(detector.im_info, whole_info)


def test_a_model_finds_the_same_boxes_on_the_reduced_photo(detect_prefix, tmp_path):
    """A trained SSD of 128 pixels through zoo.open_detector: the photo decoded at 1/8
    (500 x 375) gives the boxes the whole decoded photo gives, within two reduced pixels."""
    rng = np.random.RandomState(0)
    pixels = np.kron(rng.randint(0, 255, (30, 40, 3)), np.ones((100, 100, 1))).astype(np.uint8)
    path = save_jpeg(tmp_path / "blocks.jpg", pixels, 6)
    detector = zoo.open_detector(detect_prefix)
    reduced = detector(path, score_threshold=0.0)
    whole = detector(np.ascontiguousarray(np.rot90(pixels, -1)), score_threshold=0.0)
    assert len(reduced) == len(whole) > 10
    for box in reduced.boxes[:10]:
        assert np.abs(whole.boxes - box).max(axis=1).min() <= 2 * 8, box


def test_a_corrupt_jpeg_is_refused_at_every_scale(tmp_path):
    path = save_jpeg(tmp_path / "good.jpg", photo_pixels())
    data = bytearray(open(path, "rb").read())
    for position in range(len(data) // 2, len(data) // 2 + 400, 7):
        data[position] = (data[position] + 0x55) & 0xFF
    for needed in ((4000, 3000), (500, 375)):
        with pytest.raises(zoo.DataError, match="corrupt JPEG"):
            decode_reduced(bytes(data), "bad.jpg", needed)


def test_zoo_detect_on_large_photos_alpha_and_damaged_files(detect_prefix, turned_photo,
                                                             tmp_path, capsys):
    """Through the command line, no pictures drawn: the turned 4000x3000 photo is detected
    on in its displayed frame (boxes inside 3000 x 4000), an RGBA PNG too; a cut-short and a
    corrupt JPEG are skipped, named; crops are cut from the whole photo."""
    folder = tmp_path / "photos"
    folder.mkdir()
    os.link(turned_photo, folder / "turned.jpg")
    rgba = np.zeros((900, 1200, 4), np.uint8)
    rgba[..., :3] = 120
    rgba[100:500, 200:700] = (250, 40, 40, 128)
    Image.fromarray(rgba, "RGBA").save(folder / "alpha.png")
    whole = open(turned_photo, "rb").read()
    (folder / "cut.jpg").write_bytes(whole[:len(whole) // 2])
    corrupt = bytearray(whole)
    corrupt[len(whole) // 2:len(whole) // 2 + 300] = b"\x13" * 300
    (folder / "corrupt.jpg").write_bytes(bytes(corrupt))
    output = tmp_path / "out"
    status = main(["detect", "--checkpoint", detect_prefix, str(folder), "--output",
                   str(output), "--no-pictures", "--crops", "--threshold", "0.3",
                   "--max-detections", "3"])
    capsys.readouterr()
    assert status == 0
    results = json.loads((output / "results.json").read_text())
    entries = {os.path.basename(entry["file"]): entry for entry in results["images"]}
    assert sorted(entries) == ["alpha.png", "turned.jpg"]
    assert sorted(os.path.basename(item["file"]) for item in results["skipped"]) == \
        ["corrupt.jpg", "cut.jpg"]
    turned = entries["turned.jpg"]
    assert (turned["width"], turned["height"]) == (3000, 4000)
    assert turned["detections"]
    for row in turned["detections"]:
        x1, y1, x2, y2 = row["box"]
        assert 0 <= x1 < x2 <= 3000 and 0 <= y1 < y2 <= 4000
        crop = Image.open(output / row["crop"])
        # cut from the whole photo: the box's own size in its pixels
        assert abs(crop.width - (x2 - x1)) <= 2 and abs(crop.height - (y2 - y1)) <= 2


def test_the_decode_benchmark_reports_both_ways(tmp_path):
    """zoo benchmark-decode's measurement, on two small generated photos (figures unchecked)."""
    from zoo_bench.decode import DecodeBenchmarkOptions, benchmark_decode
    lines = []
    results = benchmark_decode(DecodeBenchmarkOptions(
        num_images=2, image_size=(800, 600), output_dir=str(tmp_path), data_shape=100,
        max_size=150), log=lines.append)
    assert results["whole"]["factors"] == [1] and results["dct"]["factors"] == [4]
    assert lines[-1].startswith("whole / dct: decode time ")
