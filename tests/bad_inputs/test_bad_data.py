"""Bad-input corpus: images, data records and paths.

Each case feeds one bad image, record or path to a reader, the loader or the packer and
asserts the exact outcome: a one-line DataError naming the file (and entry), or the count
of what ``skip_bad`` skipped.
"""
import io
import json
import os
import shutil
import struct
import warnings

import mxnet as mx
import numpy as np
import pytest
from PIL import Image

from zoo.data import (COCODataset, DetectionLoader, LstDataset, RecordDataset, ValTransform,
                      VOCDataset, embedded)
from zoo.data.images import decode_image
from zoo.errors import DataError, OptionsError
from zoo.jobs.prepare_data import PrepareOptions, prepare_data

SIZE = 64
BAD_ID = "000001"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A tiny VOC folder: 6 train and 2 val images of 64 pixels."""
    return embedded.generate(str(tmp_path_factory.mktemp("bad") / "shapes"), seed=1,
                             num_train=6, num_val=2, image_size=SIZE)


@pytest.fixture
def voc(pristine, tmp_path):
    """A private copy that a test may break."""
    return shutil.copytree(pristine, str(tmp_path / "voc"))


def image_file(root, image_id=BAD_ID):
    return os.path.join(root, "JPEGImages", image_id + ".jpg")


def read(path):
    with open(path, "rb") as stream:
        return stream.read()


def write(path, data):
    with open(path, "wb") as stream:
        stream.write(data)


def cut_with_end_marker(jpeg):
    """The issue's case: a JPEG cut short inside its scan data, with FF D9 appended."""
    return jpeg[:int(len(jpeg) * 0.7)] + b"\xff\xd9"


def png_claiming(width, height):
    """A PNG signature and IHDR chunk claiming ``width`` x ``height``, then an IEND."""
    ihdr = struct.pack(">II5B", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + b"\0" * 4
            + b"\0\0\0\0IEND\xaeB`\x82")


def jpeg_claiming(jpeg, width, height):
    """The JPEG with its frame header (SOF0) rewritten to ``width`` x ``height``."""
    sof = jpeg.index(b"\xff\xc0")
    return jpeg[:sof + 5] + struct.pack(">HH", height, width) + jpeg[sof + 9:]


def png_of(width, height):
    stream = io.BytesIO()
    Image.new("RGB", (width, height)).save(stream, "PNG")
    return stream.getvalue()


def jpeg_of(width, height):
    stream = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(stream, "JPEG")
    return stream.getvalue()


# (case id, bad bytes from the good JPEG, found when the dataset is opened?, message after
# "PATH: ")
IMAGE_FAULTS = [
    ("cut-short-with-eoi", cut_with_end_marker, False,
     "corrupt JPEG: Corrupt JPEG data: premature end of data segment"),
    ("restart-marker-mid-scan", lambda d: d[:int(len(d) * .7)] + b"\xff\xd3"
     + d[int(len(d) * .7) + 2:], False,
     "corrupt JPEG: Corrupt JPEG data: premature end of data segment"),
    ("zeroed-scan-tail", lambda d: d[:len(d) // 2] + bytes(len(d) - len(d) // 2 - 2)
     + b"\xff\xd9", False, "corrupt JPEG: Corrupt JPEG data: %d extraneous bytes before "
     "marker 0xd9"),
    ("truncated-jpeg", lambda d: d[:len(d) // 2], True, "truncated JPEG (no end marker FFD9)"),
    ("zero-bytes", lambda d: b"", True, "empty image file"),
    ("not-an-image", lambda d: b"hello, I am text\n" * 4, True,
     "not an image file (unknown format)"),
    ("png-40000x40000-header", lambda d: png_claiming(40000, 40000), True,
     "PNG header gives 40000x40000 = 1600000000 pixels, over the limit of 100000000 "
     "(set ZOO_MAX_PIXELS to raise it)"),
    ("jpeg-60000x60000-header", lambda d: jpeg_claiming(d, 60000, 60000), True,
     "JPEG header gives 60000x60000 = 3600000000 pixels, over the limit of 100000000 "
     "(set ZOO_MAX_PIXELS to raise it)"),
    ("jpeg-zero-height", lambda d: jpeg_claiming(d, SIZE, 0), True,
     "JPEG header gives an empty size 64x0"),
    ("jpeg-without-frame-header", lambda d: b"\xff\xd8\xff\xd9", True,
     "JPEG has no frame header (SOF) before its scan data"),
    ("jpeg-garbage-after-soi", lambda d: b"\xff\xd8 not really a JPEG \xff\xd9", True,
     "JPEG header is damaged or cut short before its frame header (SOF, byte 2)"),
    ("truncated-png", lambda d: png_of(SIZE, SIZE)[:-20], True,
     "truncated PNG (no IEND chunk)"),
    ("png-64x48-for-64x64", lambda d: png_of(SIZE, 48), True,
     "image is 64x48 but its annotation says 64x64"),
    ("jpeg-32x64-for-64x64", lambda d: jpeg_of(32, SIZE), True,
     "image is 32x64 but its annotation says 64x64"),
]


@pytest.mark.parametrize("make, at_open, message", [case[1:] for case in IMAGE_FAULTS],
                         ids=[case[0] for case in IMAGE_FAULTS])
def test_bad_image_is_one_line_naming_the_file(voc, make, at_open, message):
    path = image_file(voc)
    bad = make(read(path))
    write(path, bad)
    want = "%s: %s" % (path, message)
    if at_open:
        with pytest.raises(DataError) as caught:
            VOCDataset(voc, "train")
    else:
        dataset = VOCDataset(voc, "train")  # the header is fine: found when decoded
        with pytest.raises(DataError) as caught:
            dataset.verify()
    if "%d" in want:  # the extraneous-byte count is libjpeg's: check the rest exactly
        prefix, suffix = want.split("%d")
        assert str(caught.value).startswith(prefix) and str(caught.value).endswith(suffix)
    else:
        assert str(caught.value) == want


@pytest.mark.parametrize("make, at_open", [case[1:3] for case in IMAGE_FAULTS],
                         ids=[case[0] for case in IMAGE_FAULTS])
def test_bad_image_skipped_with_a_count(voc, make, at_open):
    path = image_file(voc)
    write(path, make(read(path)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = VOCDataset(voc, "train", skip_bad=True)
        dropped = dataset.verify(skip_bad=True)
    assert len(dataset) == 5 and BAD_ID not in dataset.image_ids
    assert dropped == (0 if at_open else 1) and len(caught) == 1
    message = str(caught[0].message)
    assert "skipped 1 bad record; first: %s: " % path in message, message


def test_pixel_limit_from_the_environment(voc, monkeypatch):
    monkeypatch.setenv("ZOO_MAX_PIXELS", "4000")
    with pytest.raises(DataError) as caught:
        VOCDataset(voc, "train")
    assert str(caught.value) == ("%s: JPEG header gives 64x64 = 4096 pixels, over the limit "
                                 "of 4000 (set ZOO_MAX_PIXELS to raise it)"
                                 % image_file(voc, "000000"))
    assert decode_image(read(image_file(voc)), "x", limit=4096).shape == (SIZE, SIZE, 3)


def test_pixel_limit_variable_must_be_a_number(voc, monkeypatch):
    monkeypatch.setenv("ZOO_MAX_PIXELS", "lots")
    with pytest.raises(OptionsError) as caught:
        VOCDataset(voc, "train")
    assert str(caught.value) == "ZOO_MAX_PIXELS='lots': expected a positive whole number of pixels"


# ---- paths: entries stay inside the dataset root ----

def write_image_set(root, ids):
    with open(os.path.join(root, "ImageSets", "Main", "train.txt"), "w") as stream:
        stream.write("".join(i + "\n" for i in ids))


@pytest.mark.parametrize("image_id, problem", [
    ("../../../etc/passwd", "climbs out of"),
    ("a/../../000001", "climbs out of"),
    ("/etc/passwd", "is an absolute path; it must be relative to"),
])
def test_image_set_id_escaping_the_root(voc, image_id, problem):
    write_image_set(voc, ["000000", image_id])
    with pytest.raises(DataError) as caught:
        VOCDataset(voc, "train")
    images = os.path.join(voc, "JPEGImages")
    assert str(caught.value) == "%s: image id %r %s %s" % (
        os.path.join(voc, "ImageSets", "Main", "train.txt"), image_id, problem, images)
    with pytest.warns(UserWarning, match="skipped 1 bad record; first: .*image id"):
        assert len(VOCDataset(voc, "train", skip_bad=True)) == 1


def coco_file(voc, tmp_path, file_name):
    """A one-image COCO file whose image entry is ``file_name``; returns its path."""
    path = str(tmp_path / "instances.json")
    with open(path, "w") as stream:
        json.dump({"images": [{"id": 1, "file_name": file_name, "width": SIZE, "height": SIZE}],
                   "annotations": [], "categories": [{"id": 1, "name": "circle"}]}, stream)
    return path


@pytest.mark.parametrize("file_name, problem", [
    ("../voc/JPEGImages/000001.jpg", "climbs out of"),
    ("../../../../../../etc/hostname", "climbs out of"),
    ("/etc/hostname", "is an absolute path; it must be relative to"),
])
def test_coco_file_name_escaping_the_root(voc, tmp_path, file_name, problem):
    path = coco_file(voc, tmp_path, file_name)
    images = os.path.join(voc, "JPEGImages")
    with pytest.raises(DataError) as caught:
        COCODataset(path, images)
    assert str(caught.value) == "%s: image id 1: file_name %r %s %s" % (
        path, file_name, problem, images)


def test_coco_file_name_inside_the_root_reads(voc, tmp_path):
    path = coco_file(voc, tmp_path, "sub/../000001.jpg")
    assert COCODataset(path, os.path.join(voc, "JPEGImages")).records[0].path == image_file(voc)


@pytest.fixture
def packed(voc):
    """``PREFIX`` of .lst/.rec/.idx files packed from the train split in the VOC root."""
    prefix = os.path.join(voc, "train")
    prepare_data(PrepareOptions(format="voc", output=prefix, root=voc, split="train"))
    return prefix


def replace_lst_path(prefix, line, new_path):
    with open(prefix + ".lst") as stream:
        lines = stream.readlines()
    fields = lines[line - 1].rstrip("\n").split("\t")
    lines[line - 1] = "\t".join(fields[:-1] + [new_path]) + "\n"
    with open(prefix + ".lst", "w") as stream:
        stream.writelines(lines)


@pytest.mark.parametrize("new_path, problem", [
    ("/etc/hostname", "is an absolute path; it must be relative to"),
    ("../../voc/JPEGImages/000001.jpg", "climbs out of"),
])
def test_lst_path_escaping_the_root(packed, voc, new_path, problem):
    replace_lst_path(packed, 2, new_path)
    with pytest.raises(DataError) as caught:
        LstDataset(packed + ".lst")
    assert str(caught.value) == "%s.lst:2: image path %r %s %s" % (packed, new_path, problem,
                                                                   voc)


# ---- .rec records ----

def pack_with_bad_record(prefix, voc, bad_bytes):
    """Rewrite record 2 of a packed .rec with ``bad_bytes`` as its image (same label)."""
    reader = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    items = [mx.recordio.unpack(reader.read_idx(key)) for key in reader.keys]
    reader.close()
    writer = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "w")
    for key, (header, data) in enumerate(items):
        writer.write_idx(key, mx.recordio.pack(header, bad_bytes if key == 2 else data))
    writer.close()


def all_batches(loader, epoch=0):
    return list(loader.epoch(epoch))


@pytest.mark.parametrize("make, message", [
    (cut_with_end_marker, "corrupt JPEG: Corrupt JPEG data: premature end of data segment"),
    (lambda d: b"", "empty image file"),
])
def test_bad_rec_record_mid_file_stops_the_epoch(packed, voc, make, message):
    pack_with_bad_record(packed, voc, make(read(image_file(voc, "000002"))))
    loader = DetectionLoader(RecordDataset(packed + ".rec"), 2, ValTransform(32), shuffle=False)
    with pytest.raises(DataError) as caught:
        all_batches(loader)
    assert str(caught.value) == "%s.rec: record 2: %s" % (packed, message)


def test_bad_rec_record_mid_file_skipped_with_a_count(packed, voc):
    pack_with_bad_record(packed, voc, cut_with_end_marker(read(image_file(voc, "000002"))))
    loader = DetectionLoader(RecordDataset(packed + ".rec"), 2, ValTransform(32), shuffle=False,
                             skip_bad=True)
    with pytest.warns(UserWarning) as caught:
        batches = all_batches(loader)
    assert [len(batch.data) for batch in batches] == [2, 2, 2]
    assert len(caught) == 1 and str(caught[0].message) == (
        "epoch 0: skipped 1 bad item, each replaced by the next readable one; first: %s.rec: "
        "record 2: corrupt JPEG: Corrupt JPEG data: premature end of data segment" % packed)
    assert loader.last_skipped.keys() == {2}


def test_rec_verify_finds_a_bad_record_before_training(packed, voc):
    pack_with_bad_record(packed, voc, cut_with_end_marker(read(image_file(voc, "000002"))))
    with pytest.raises(DataError) as caught:
        RecordDataset(packed + ".rec").verify()
    assert str(caught.value) == ("%s.rec: record 2: corrupt JPEG: Corrupt JPEG data: premature "
                                 "end of data segment" % packed)
    dataset = RecordDataset(packed + ".rec", skip_bad=True)
    with pytest.warns(UserWarning, match=r"train\.rec: skipped 1 bad record; first: .*record 2"):
        assert dataset.verify(skip_bad=True) == 1
    assert dataset.image_ids == [0, 1, 3, 4, 5] and len(dataset.records) == 5


def test_unreadable_rec_record_dropped_from_records_with_skip_bad(packed):
    with open(packed + ".idx") as stream:
        offset = int(stream.readlines()[3].split("\t")[1])
    with open(packed + ".rec", "r+b") as stream:  # break record 3's magic number
        stream.seek(offset)
        stream.write(b"\0\0\0\0")
    with pytest.raises(DataError, match=r"train\.rec: record 3: unreadable record"):
        RecordDataset(packed + ".rec").records
    dataset = RecordDataset(packed + ".rec", skip_bad=True)
    with pytest.warns(UserWarning, match=r"train\.rec: skipped 1 bad record; first: .*record 3"):
        assert len(dataset.records) == 5
    assert dataset.image_ids == [0, 1, 2, 4, 5] and len(dataset) == 5


# ---- the loader meets a bad image mid-epoch ----

@pytest.mark.parametrize("make, message", [
    (cut_with_end_marker, "corrupt JPEG: Corrupt JPEG data: premature end of data segment"),
    (lambda d: jpeg_of(SIZE, 48), "image is 64x48 but its annotation says 64x64"),
    (lambda d: b"", "empty image file"),
])
def test_bad_image_mid_epoch(voc, make, message):
    dataset = VOCDataset(voc, "train")
    write(image_file(voc), make(read(image_file(voc))))  # broken after the dataset was opened
    strict = DetectionLoader(dataset, 2, ValTransform(32), num_workers=2)
    with pytest.raises(DataError) as caught:
        all_batches(strict)
    assert str(caught.value) == "%s: %s" % (image_file(voc), message)
    skipping = DetectionLoader(dataset, 2, ValTransform(32), num_workers=2, skip_bad=True)
    with pytest.warns(UserWarning, match=r"^epoch 0: skipped 1 bad item, each replaced by the "
                                         r"next readable one; first: .*000001\.jpg: "):
        batches = all_batches(skipping)
    assert [batch.data.shape for batch in batches] == [(2, 3, 32, 32)] * 3
    seen = np.concatenate([batch.indices for batch in batches])
    assert sorted(seen) == list(range(6))  # the batch indices are the epoch's order


def test_skipping_mid_epoch_is_deterministic_and_resumes_exactly(voc):
    dataset = VOCDataset(voc, "train")
    write(image_file(voc), cut_with_end_marker(read(image_file(voc))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = all_batches(DetectionLoader(dataset, 3, ValTransform(32), num_workers=1,
                                            skip_bad=True), epoch=1)
        resumed = DetectionLoader(dataset, 3, ValTransform(32), num_workers=3, skip_bad=True)
        resumed.set_epoch(1)
        again = list(iter(resumed))
    for one, two in zip(first, again):
        np.testing.assert_array_equal(one.data, two.data)
        np.testing.assert_array_equal(one.label, two.label)


def test_every_item_bad_gives_up_with_one_line(voc):
    dataset = VOCDataset(voc, "train")
    for image_id in dataset.image_ids:
        write(image_file(voc, image_id), b"")
    loader = DetectionLoader(dataset, 2, ValTransform(32), shuffle=False, skip_bad=True)
    with pytest.raises(DataError) as caught:
        all_batches(loader)
    assert str(caught.value) == ("no readable item among the 5 after dataset item 0 in the "
                                 "epoch's order; it was skipped as: %s: empty image file"
                                 % image_file(voc, "000000"))


# ---- packing: no .part files left behind ----

def test_failed_packing_leaves_no_part_files(voc, tmp_path):
    write(image_file(voc, "000003"), cut_with_end_marker(read(image_file(voc, "000003"))))
    prefix = str(tmp_path / "out" / "train")
    with pytest.raises(DataError) as caught:
        prepare_data(PrepareOptions(format="voc", output=prefix, root=voc, split="train"))
    assert str(caught.value) == ("%s: corrupt JPEG: Corrupt JPEG data: premature end of data "
                                 "segment" % image_file(voc, "000003"))
    assert os.listdir(str(tmp_path / "out")) == []


def test_packing_removes_a_killed_runs_part_files_and_skips_bad_images(voc, tmp_path):
    write(image_file(voc, "000003"), cut_with_end_marker(read(image_file(voc, "000003"))))
    prefix = str(tmp_path / "train")
    for ext in ("lst", "rec", "idx"):
        write("%s.%s.part" % (prefix, ext), b"left by a killed run")
    with pytest.warns(UserWarning, match=r"skipped 1 bad record; first: .*000003\.jpg: corrupt"):
        result = prepare_data(PrepareOptions(format="voc", output=prefix, root=voc,
                                             split="train", skip_bad=True))
    assert result.images == 5
    assert not [name for name in os.listdir(str(tmp_path)) if name.endswith(".part")]
    assert len(RecordDataset(prefix + ".rec")) == 5


# ---- unusual but sound images still read ----

def with_long_segment(jpeg):
    """The JPEG with a 20 kB comment segment before its frame header (as EXIF thumbnails
    and ICC profiles are)."""
    body = b"x" * 20000
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def as_bmp(jpeg):
    stream = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(stream, "BMP")
    return stream.getvalue()


@pytest.mark.parametrize("make", [with_long_segment, as_bmp, lambda d: d + b"\0" * 100],
                         ids=["header-past-the-first-4k", "bmp", "padding-after-eoi"])
def test_sound_images_read(voc, make):
    good = VOCDataset(voc, "train")[1][0]
    write(image_file(voc), make(read(image_file(voc))))
    dataset = VOCDataset(voc, "train")
    assert dataset.verify() == 0
    image = dataset[1][0]
    assert image.shape == (SIZE, SIZE, 3) and np.abs(image.astype(int) - good).max() <= 0


# ---- on the command line: the error names --skip-bad, the warning is one line ----

def test_the_command_line_names_skip_bad_and_warns_in_one_line(voc, tmp_path):
    """In a child process, so that Python's own warning display (not pytest's recorder)
    shows the warning: one line, no file, line or source of the zoo's code."""
    import subprocess
    import sys
    write(image_file(voc, "000003"), cut_with_end_marker(read(image_file(voc, "000003"))))
    argv = [sys.executable, "-m", "zoo", "prepare-data", "--format", "voc", "--root", voc,
            "--split", "train", "--output", str(tmp_path / "rec" / "train")]
    strict = subprocess.run(argv, capture_output=True, text=True)
    assert strict.returncode == 1
    assert strict.stderr == ("zoo prepare-data: error: %s: corrupt JPEG: Corrupt JPEG data: "
                             "premature end of data segment; --skip-bad skips such an image "
                             "with a warning\n" % image_file(voc, "000003"))
    skipping = subprocess.run(argv + ["--skip-bad"], capture_output=True, text=True)
    assert skipping.returncode == 0, skipping.stderr
    assert skipping.stderr.splitlines() == [
        "zoo prepare-data: warning: %s: skipped 1 bad record; first: %s: corrupt JPEG: Corrupt "
        "JPEG data: premature end of data segment"
        % (os.path.join(voc, "ImageSets", "Main", "train.txt"), image_file(voc, "000003"))]
