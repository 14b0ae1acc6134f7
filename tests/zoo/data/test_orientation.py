"""Photos as they are: EXIF orientation applied by the detectors and `zoo demo` (or ignored on
request, the results saying which frame), and decided per image from the annotation's size
by the dataset readers. The photos are JPEGs whose EXIF tag the tests write with Pillow."""
import json
import os
import warnings

import numpy as np
import pytest
from PIL import Image, ImageOps

import zoo
from zoo.cli import main as zoo_main
from zoo.data import COCODataset, VOCDataset
from zoo.data.orientation import exif_orientation, file_orientation, orient
from zoo.data.voc import annotation_xml

STORED = (128, 64)  # width, height of the stored pixels: a landscape photo


def photo(path, orientation, size=STORED, seed=0, comment_bytes=0):
    """Write a textured JPEG of ``size`` whose EXIF says ``orientation``; its stored
    pixels as Pillow decodes them."""
    rng = np.random.default_rng(seed)
    width, height = size
    pixels = np.kron(rng.integers(0, 255, (height // 8, width // 8, 3)),
                     np.ones((8, 8, 1))).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    if comment_bytes:
        exif[0x010E] = "x" * comment_bytes  # ImageDescription: a long EXIF segment
    Image.fromarray(pixels).save(path, quality=95, exif=exif.tobytes())
    return np.asarray(Image.open(path).convert("RGB"))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orient_turns_pixels_as_pillow_does(tmp_path, orientation):
    path = str(tmp_path / "p.jpg")
    stored = photo(path, orientation)
    assert exif_orientation(open(path, "rb").read()) == orientation
    with Image.open(path) as image:
        expected = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
    np.testing.assert_array_equal(orient(stored, orientation), expected)


def test_orientation_is_read_from_the_header_without_decoding(tmp_path, monkeypatch):
    path = str(tmp_path / "long.jpg")
    photo(path, 8, comment_bytes=20000)  # the EXIF segment outgrows the first read
    plain = str(tmp_path / "plain.jpg")
    Image.fromarray(np.zeros((10, 20, 3), np.uint8)).save(plain)
    others = []
    for extension in ("png", "webp", "tiff"):  # EXIF in a PNG eXIf chunk, WebP, TIFF tags
        others.append(str(tmp_path / ("p." + extension)))
        exif = Image.Exif()
        exif[0x0112] = 5
        Image.fromarray(np.zeros((10, 20, 3), np.uint8)).save(others[-1], exif=exif.tobytes())
    import simplejpeg
    from PIL import ImageFile
    monkeypatch.setattr(simplejpeg, "decode_jpeg", lambda *a, **k: pytest.fail("decoded"))
    for loader in (Image.Image, ImageFile.ImageFile):
        monkeypatch.setattr(loader, "load", lambda *a, **k: pytest.fail("decoded"))
    assert file_orientation(path) == 8 and file_orientation(plain) == 1
    assert [file_orientation(other) for other in others] == [5, 5, 5]


def as_rows(found):
    return np.column_stack([found.labels, found.scores, found.boxes])


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_detector_boxes_are_in_the_displayed_frame(detect_prefix, tmp_path, orientation):
    path = str(tmp_path / "photo.jpg")
    stored = photo(path, orientation)
    displayed = orient(stored, orientation)
    options = dict(score_threshold=0.0, max_detections=20)
    detector = zoo.load_detector(detect_prefix)
    found = detector(path, **options)
    assert found.frame == "displayed"
    np.testing.assert_allclose(as_rows(found), as_rows(detector(displayed, **options)), atol=2e-3)
    kept = zoo.load_detector(detect_prefix, exif="ignore")(path, **options)
    assert kept.frame == "stored"
    np.testing.assert_allclose(as_rows(kept), as_rows(detector(stored, **options)), atol=2e-3)
    assert not np.allclose(found.boxes, kept.boxes, atol=1)
    height, width = displayed.shape[:2]
    assert found.boxes[:, [0, 2]].max() <= width and found.boxes[:, [1, 3]].max() <= height


def test_an_unknown_exif_choice_is_refused(detect_prefix):
    with pytest.raises(ValueError, match="exif='rotate': expected one of apply, ignore"):
        zoo.load_detector(detect_prefix, exif="rotate")


def test_demo_draws_in_the_displayed_frame_unless_told(detect_prefix, tmp_path, capsys):
    path = str(tmp_path / "phone.jpg")
    photo(path, 6)
    for flags, size, frame in (([], (64, 128), "displayed"),
                               (["--exif", "ignore"], (128, 64), "stored")):
        output = str(tmp_path / ("out-%s.png" % frame))
        assert zoo_main(["demo", "--checkpoint", detect_prefix, "--image", path, "--output",
                         output, "--threshold", "0"] + flags) == 0
        assert "boxes in the %s frame" % frame in capsys.readouterr().out
        assert Image.open(output).size == size
    with pytest.raises(SystemExit) as exit_:
        zoo_main(["demo", "--checkpoint", detect_prefix, "--image", path, "--exif", "turn"])
    assert exit_.value.code == 2


def voc_folder(root, photos):
    """A VOC folder of ``photos``: (id, orientation, stored size, annotated size)."""
    for folder in ("Annotations", "JPEGImages", "ImageSets/Main"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    for index, (image_id, orientation, stored, annotated) in enumerate(photos):
        photo(os.path.join(root, "JPEGImages", image_id + ".jpg"), orientation, stored, index)
        with open(os.path.join(root, "Annotations", image_id + ".xml"), "w") as stream:
            stream.write(annotation_xml(image_id + ".jpg", *annotated,
                                        [("dog", (2, 3, 20, 30), 0)]))
    with open(os.path.join(root, "ImageSets", "Main", "val.txt"), "w") as stream:
        stream.write("".join(image_id + "\n" for image_id, *_ in photos))
    with open(os.path.join(root, "classes.txt"), "w") as stream:
        stream.write("dog\n")
    return root


def test_voc_reader_decides_each_frame_from_the_annotated_size(tmp_path):
    root = voc_folder(str(tmp_path / "voc"), [
        ("turned6", 6, (128, 64), (64, 128)),    # annotated on the displayed picture
        ("turned8", 8, (128, 64), (64, 128)),
        ("stored6", 6, (128, 64), (128, 64)),    # annotated on the stored pixels
        ("upside", 3, (128, 64), (128, 64)),     # a 180-degree turn: cannot be told
        ("square", 8, (96, 96), (96, 96))])      # square: cannot be told
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = VOCDataset(root, "val")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "2 images with an EXIF orientation" in messages[0]
    assert [r.orientation for r in dataset.records] == [6, 8, 1, 1, 1]
    for index, (height, width) in enumerate([(128, 64), (128, 64), (64, 128), (64, 128),
                                             (96, 96)]):
        image, label = dataset[index]
        assert image.shape == (height, width, 3)
    stored = photo(str(tmp_path / "again.jpg"), 6, seed=0)
    np.testing.assert_array_equal(dataset[0][0], orient(stored, 6))


def test_voc_reader_refuses_a_size_of_neither_frame(tmp_path):
    root = voc_folder(str(tmp_path / "voc"), [("odd", 6, (128, 64), (100, 50))])
    with pytest.raises(zoo.DataError, match="odd.jpg: image is 128x64 but its annotation "
                                            "says 100x50"):
        VOCDataset(root, "val")


def test_coco_reader_decides_each_frame_too(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    entries = []
    for image_id, (name, orientation, annotated) in enumerate(
            [("a.jpg", 6, (64, 128)), ("b.jpg", 8, (128, 64)), ("c.jpg", 3, (128, 64))], 40):
        photo(str(images / name), orientation, STORED, image_id)
        entries.append({"id": image_id, "file_name": name, "width": annotated[0],
                        "height": annotated[1]})
    path = tmp_path / "instances.json"
    path.write_text(json.dumps({"images": entries, "categories": [{"id": 3, "name": "dog"}],
                                "annotations": [{"id": 1, "image_id": 40, "category_id": 3,
                                                 "bbox": [1, 90, 20, 30], "area": 600}]}))
    with pytest.warns(UserWarning, match="1 image with an EXIF orientation"):
        dataset = COCODataset(str(path), str(images))
    assert [r.orientation for r in dataset.records] == [6, 1, 1]
    assert dataset[0][0].shape == (128, 64, 3) and dataset[1][0].shape == (64, 128, 3)


def test_packing_refuses_a_photo_annotated_turned(tmp_path):
    from zoo.data.recordio import write_record_files
    root = voc_folder(str(tmp_path / "voc"), [("turned", 6, (128, 64), (64, 128)),
                                              ("plain", 1, (128, 64), (128, 64))])
    dataset = VOCDataset(root, "val")
    with pytest.raises(zoo.DataError, match="turned.jpg: annotated on the picture its EXIF "
                                            "orientation 6 turns \\(64x128\\)"):
        write_record_files(dataset, str(tmp_path / "pack" / "voc"))
    with pytest.warns(UserWarning, match="skipped 1 bad record"):
        assert write_record_files(dataset, str(tmp_path / "pack" / "voc"),
                                  skip_bad=True)[0] == 1


def test_the_onnx_detector_turns_photos_too(tmp_path):
    pytest.importorskip("onnxruntime")
    from test_onnx_runtime import write_export
    from zoo.onnx.runtime import load_onnx_detector
    path = str(tmp_path / "phone.jpg")
    photo(path, 6)
    export = write_export(tmp_path / "toy.onnx")  # boxes at fixed fractions of the image
    turned = load_onnx_detector(export)(path, score_threshold=0.0)
    kept = load_onnx_detector(export, exif="ignore")(path, score_threshold=0.0)
    assert (turned.frame, kept.frame) == ("displayed", "stored")
    np.testing.assert_allclose(turned.boxes[:, 2:].max(axis=0), [0.9 * 64, 0.9 * 128],
                               rtol=1e-5)
    np.testing.assert_allclose(kept.boxes[:, 2:].max(axis=0), [0.9 * 128, 0.9 * 64],
                               rtol=1e-5)


def test_exif_segment_found_past_fill_bytes_and_standalone_markers(tmp_path):
    path = str(tmp_path / "p.jpg")
    photo(path, 6)
    data = open(path, "rb").read()
    assert exif_orientation(data[:2] + b"\xff\xff\x01" + data[2:]) == 6  # fill, then TEM
    assert exif_orientation(data[:30]) is None  # cut short inside the segment: read more
    assert exif_orientation(data[:2] + b"\x00" + data[2:]) == 1  # not a marker: no turn
