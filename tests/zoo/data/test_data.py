"""Dataset readers: VOC, COCO, .lst/.rec (through tools/prepare_dataset.py), and bad input."""
import json
import os
import shutil
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from zoo.data import COCODataset, LstDataset, RecordDataset, VOCDataset, embedded
from zoo.data.images import decode_image
from zoo.cli import main as zoo_main
from zoo.errors import DataError

from factories import ROOT as REPO
CATEGORY_IDS = (40, 7, 13, 2)
"""COCO category ids of the shape classes: unsorted and sparse, to test the class-id map."""


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A small generated VOC folder: 10 train and 4 val images of 96 pixels."""
    return embedded.generate(str(tmp_path_factory.mktemp("data") / "shapes"), seed=3,
                             num_train=10, num_val=4, image_size=96)


@pytest.fixture
def voc(shapes, tmp_path):
    """A private copy of the VOC folder that a test may break."""
    return shutil.copytree(shapes, str(tmp_path / "voc"))


def write_coco(voc_dataset, path, crowd_image=0):
    """Write a VOC dataset's ground truth as a COCO annotation file; the first object of
    image ``crowd_image`` becomes a crowd region. Returns the JSON dict."""
    images, annotations = [], []
    for image_id, record in enumerate(voc_dataset.records, 1):
        images.append({"id": image_id, "file_name": os.path.basename(record.path),
                       "width": record.width, "height": record.height})
        for index, (box, class_id) in enumerate(zip(record.boxes.tolist(), record.class_ids)):
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id,
                "category_id": CATEGORY_IDS[class_id], "area": 1.0,
                "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
                "iscrowd": int(image_id - 1 == crowd_image and index == 0)})
    names = voc_dataset.class_names
    data = {"images": images, "annotations": annotations,
            "categories": [{"id": cid, "name": names[i]} for i, cid in enumerate(CATEGORY_IDS)]}
    with open(path, "w") as stream:
        json.dump(data, stream, indent=1)
    return data


def voc_boxes_from_xml(path):
    """Class names and 0-based boxes read straight from a VOC XML file."""
    root = ElementTree.parse(path).getroot()
    return [(obj.find("name").text, [float(obj.find("bndbox/" + tag).text) - 1
                                     for tag in ("xmin", "ymin", "xmax", "ymax")])
            for obj in root.iter("object")]


def test_voc_reads_labels_in_0_based_pixels(shapes):
    dataset = VOCDataset(shapes, "train")
    assert len(dataset) == 10 and dataset.class_names == list(embedded.CLASSES)
    for index, record in enumerate(dataset.records):
        expected = voc_boxes_from_xml(os.path.join(shapes, "Annotations", record.key + ".xml"))
        assert [dataset.class_names[c] for c in record.class_ids] == [n for n, _ in expected]
        np.testing.assert_allclose(record.boxes, [b for _, b in expected])
        assert dataset.image_path(index) == os.path.join(shapes, "JPEGImages", record.key + ".jpg")
    image, label = dataset[3]
    assert image.shape == (96, 96, 3) and image.dtype == np.uint8
    assert label.dtype == np.float32 and label.shape[1] == 6
    np.testing.assert_array_equal(label, dataset.records[3].label())
    assert VOCDataset(shapes, ["000011", "000002"]).image_ids == ["000011", "000002"]


def test_voc_labels_match_gluoncv(shapes):
    from gluoncv.data import VOCDetection

    class ShapesDetection(VOCDetection):
        CLASSES = embedded.CLASSES

    theirs = ShapesDetection(root=os.path.dirname(shapes),
                             splits=((os.path.basename(shapes), "val"),))
    ours = VOCDataset(shapes, "val")
    assert len(theirs) == len(ours) == 4
    for index in range(len(ours)):
        label = theirs[index][1]
        np.testing.assert_allclose(ours[index][1], label[:, [4, 0, 1, 2, 3, 5]])


def test_coco_maps_categories_and_crowds(shapes, tmp_path):
    voc = VOCDataset(shapes, "train")
    path = str(tmp_path / "instances.json")
    write_coco(voc, path)
    dataset = COCODataset(path, os.path.join(shapes, "JPEGImages"))
    assert dataset.class_names == [voc.class_names[CATEGORY_IDS.index(c)]
                                   for c in sorted(CATEGORY_IDS)]
    assert dataset.category_ids == sorted(CATEGORY_IDS)
    assert dataset.image_ids == list(range(1, 11)) and len(dataset.coco.getImgIds()) == 10
    for ours, theirs in zip(dataset.records, voc.records):
        names = [dataset.class_names[c] for c in ours.class_ids]
        assert names == [voc.class_names[c] for c in theirs.class_ids]
        np.testing.assert_allclose(ours.boxes, theirs.boxes, atol=1e-4)
    crowds = dataset.records[0].difficult.tolist()
    assert crowds == [True] + [False] * (len(voc.records[0].boxes) - 1)
    image, label = dataset[0]
    np.testing.assert_array_equal(image, voc[0][0])
    assert label[0, 5] == 1


def assert_same_labels(dataset, reference, normalised_atol=1e-4):
    """Labels of two datasets agree to ``normalised_atol`` of the image size."""
    assert len(dataset) == len(reference)
    for ours, theirs in zip(dataset.records, reference.records):
        assert (ours.width, ours.height) == (theirs.width, theirs.height)
        np.testing.assert_array_equal(ours.class_ids, theirs.class_ids)
        np.testing.assert_array_equal(ours.difficult, theirs.difficult)
        scale = [theirs.width, theirs.height] * 2
        np.testing.assert_allclose(ours.boxes / scale, theirs.boxes / scale, atol=normalised_atol)


def test_prepare_voc_round_trips_through_lst_and_rec(shapes, tmp_path, capsys):
    prefix = str(tmp_path / "packed" / "train")
    assert zoo_main(["prepare-data", "--format", "voc", "--root", shapes, "--image-set", "train",
                    "--output", prefix]) == 0
    assert "wrote 10 images" in capsys.readouterr().out
    voc = VOCDataset(shapes, "train")
    listed, packed = LstDataset(prefix + ".lst", image_root=shapes), RecordDataset(prefix + ".rec")
    assert listed.class_names == packed.class_names == voc.class_names
    assert_same_labels(listed, voc)
    assert_same_labels(packed, voc)
    for index in (0, 9):
        np.testing.assert_array_equal(packed[index][0], voc[index][0])
        np.testing.assert_allclose(packed[index][1], voc[index][1], atol=1e-4 * 96)
        np.testing.assert_allclose(listed[index][1], voc[index][1], atol=1e-4 * 96)
    assert packed.image_path(0) is None and listed.image_path(0).endswith("000000.jpg")


def test_record_file_reads_like_gluoncv(shapes, tmp_path):
    from gluoncv.data import RecordFileDetection

    prefix = str(tmp_path / "val")
    assert zoo_main(["prepare-data", "--format", "voc", "--root", shapes, "--image-set", "val",
                    "--output", prefix]) == 0
    theirs, ours = RecordFileDetection(prefix + ".rec"), RecordDataset(prefix + ".rec")
    for index in range(len(ours)):
        label = theirs[index][1]
        np.testing.assert_allclose(ours[index][1], label[:, [4, 0, 1, 2, 3, 5]], atol=1e-4)


def test_prepare_coco_round_trips(shapes, tmp_path):
    path = str(tmp_path / "instances.json")
    write_coco(VOCDataset(shapes, "val"), path)
    prefix = str(tmp_path / "coco_val")
    assert zoo_main(["prepare-data", "--format", "coco", "--annotations", path, "--image-dir",
                    os.path.join(shapes, "JPEGImages"), "--output", prefix]) == 0
    coco = COCODataset(path, os.path.join(shapes, "JPEGImages"))
    assert_same_labels(RecordDataset(prefix + ".rec"), coco)


def test_prepare_script_runs_and_reports_errors(shapes, tmp_path):
    script = os.path.join(REPO, "tools", "prepare_dataset.py")
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, script, "--format", "voc", "--root", shapes,
                           "--image-set", "val", "--output", str(tmp_path / "val")],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "packed 4/4 images" in done.stdout and "wrote 4 images" in done.stdout
    assert sorted(os.listdir(tmp_path)) == ["val.box_convention.txt", "val.classes.txt",
                                            "val.idx", "val.lst", "val.rec"]
    failed = subprocess.run([sys.executable, script, "--format", "voc", "--root", shapes,
                             "--image-set", "nope", "--output", str(tmp_path / "x")],
                            env=env, capture_output=True, text=True)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.count("\n") == 1 and "nope.txt" in failed.stderr


# ---- bad input: each fault raises one DataError line naming the file (and line) ----

def replace_in(path, old, new):
    """Replace the first occurrence of ``old`` in a text file."""
    with open(path) as stream:
        text = stream.read()
    assert old in text
    with open(path, "w") as stream:
        stream.write(text.replace(old, new, 1))


def first_tag_value(path, tag):
    """The text of the first ``<tag>`` in an XML file."""
    return ElementTree.parse(path).getroot().find(".//" + tag).text


def truncate(path, keep=0.5):
    """Cut a file to a fraction of its size."""
    with open(path, "rb") as stream:
        data = stream.read()
    with open(path, "wb") as stream:
        stream.write(data[:int(len(data) * keep)])


def annotation(root, image_id="000001"):
    """The annotation file of an image."""
    return os.path.join(root, "Annotations", image_id + ".xml")


def break_xml_box_outside(root):
    """Move the first box's right edge far outside the 96-pixel image."""
    replace_in(annotation(root), "<xmax>%s</xmax>" % first_tag_value(annotation(root), "xmax"),
               "<xmax>500</xmax>")


def break_xml_inverted_box(root):
    """Put the first box's bottom edge above its top."""
    replace_in(annotation(root), "<ymax>%s</ymax>" % first_tag_value(annotation(root), "ymax"),
               "<ymax>1</ymax>")


def break_xml_syntax(root):
    """Leave a tag unclosed on line 4, which expat reports at line 5."""
    replace_in(annotation(root), "</size>", "</size\n<oops>")


VOC_FAULTS = [
    (lambda root: os.remove(os.path.join(root, "JPEGImages", "000001.jpg")),
     "JPEGImages/000001.jpg", "No such file"),
    (lambda root: truncate(os.path.join(root, "JPEGImages", "000001.jpg")),
     "JPEGImages/000001.jpg", "truncated JPEG"),
    (lambda root: open(os.path.join(root, "JPEGImages", "000001.jpg"), "w").close(),
     "JPEGImages/000001.jpg", "empty image file"),
    (break_xml_box_outside, "000001.xml", "lies outside the 96x96 image"),
    (break_xml_inverted_box, "000001.xml", "empty or inverted"),
    (lambda root: replace_in(annotation(root), "<name>", "<name>hexagon"),
     "000001.xml", "unknown class"),
    (lambda root: open(annotation(root), "w").close(), "000001.xml", "empty annotation file"),
    (break_xml_syntax, "000001.xml:5:", "malformed XML"),
    (lambda root: replace_in(annotation(root), "<xmin>", "<xmin>x"), "000001.xml",
     "not a number"),
    (lambda root: replace_in(annotation(root), "<difficult>0", "<difficult>7"), "000001.xml",
     "not 0 or 1"),
]


@pytest.mark.parametrize("fault, where, what", VOC_FAULTS)
def test_voc_fault_raises_one_line_naming_the_file(voc, fault, where, what):
    fault(voc)
    with pytest.raises(DataError) as caught:
        VOCDataset(voc, "train")
    message = str(caught.value)
    assert "\n" not in message and where in message and what in message, message


def test_voc_skip_bad_drops_records_with_one_warning(voc):
    break_xml_box_outside(voc)
    replace_in(annotation(voc, "000004"), "<name>", "<name>hexagon")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = VOCDataset(voc, "train", skip_bad=True)
    assert len(dataset) == 8 and "000001" not in dataset.image_ids
    assert len(caught) == 1
    assert "skipped 2 bad records" in str(caught[0].message)
    assert "000001.xml" in str(caught[0].message)


def test_voc_missing_image_set_lists_the_known_ones(voc):
    with pytest.raises(DataError, match=r"ImageSets/Main/test\.txt: no image set 'test'; "
                                        r"available: train, trainval, val"):
        VOCDataset(voc, "test")


def test_image_faults_found_when_decoding(voc):
    dataset = VOCDataset(voc, "train")
    from PIL import Image
    Image.new("RGB", (64, 48)).save(dataset.image_path(2))
    with pytest.raises(DataError, match=r"000002\.jpg: image is 64x48 but its annotation says "
                                        r"96x96"):
        dataset[2]
    with open(dataset.image_path(3), "rb") as stream:
        data = stream.read()
    with pytest.raises(DataError, match="somewhere: truncated JPEG"):
        decode_image(data[:len(data) // 2], "somewhere")
    with pytest.raises(DataError, match="somewhere: JPEG header is damaged"):
        decode_image(b"\xff\xd8 not really a JPEG \xff\xd9", "somewhere")


@pytest.fixture
def coco(shapes, tmp_path):
    """``(json_path, image_dir, data)``: a COCO file of the train images that a test may break."""
    path = str(tmp_path / "instances.json")
    return path, os.path.join(shapes, "JPEGImages"), write_coco(VOCDataset(shapes, "train"),
                                                                path)


def rewrite_json(path, data):
    """Write a COCO dict back to its file."""
    with open(path, "w") as stream:
        json.dump(data, stream, indent=1)


def coco_with(change):
    """A fault that edits the parsed COCO dict and writes it back."""
    def fault(path, data):
        change(data)
        rewrite_json(path, data)
    return fault


def break_json_syntax(path, data):
    """Add a trailing comma on line 7, which JSON reports at line 8."""
    with open(path) as stream:
        lines = stream.read().split("\n")
    lines[6] += ","
    with open(path, "w") as stream:
        stream.write("\n".join(lines))


COCO_FAULTS = [
    (break_json_syntax, "instances.json:8:", "malformed JSON"),
    (lambda path, data: open(path, "w").close(), "instances.json", "empty annotation file"),
    (coco_with(lambda d: d["annotations"][0].update(category_id=99)), "image id 1",
     "unknown category id 99"),
    (coco_with(lambda d: d["annotations"][0].update(bbox=[90, 0, 50, 10])), "image id 1",
     "lies outside the 96x96 image"),
    (coco_with(lambda d: d["annotations"][0].update(bbox=[10, 10, -5, 10])), "image id 1",
     "empty or inverted"),
    (coco_with(lambda d: d["annotations"][0].update(bbox=[10, 10])), "image id 1",
     "is not [x, y, w, h]"),
    (coco_with(lambda d: d["annotations"][0].update(image_id=1234)), "annotations[0]",
     "names no known image"),
    (coco_with(lambda d: d["annotations"][0].update(category_id=[1])), "image id 1",
     "no integer category_id"),
    (coco_with(lambda d: d["images"][2].update(file_name="missing.jpg")), "missing.jpg",
     "No such file"),
    (coco_with(lambda d: d.pop("categories")), "instances.json", "no 'categories' list"),
]


@pytest.mark.parametrize("fault, where, what", COCO_FAULTS)
def test_coco_fault_raises_one_line_naming_the_file(coco, fault, where, what):
    path, image_dir, data = coco
    fault(path, data)
    with pytest.raises(DataError) as caught:
        COCODataset(path, image_dir)
    message = str(caught.value)
    assert "\n" not in message and where in message and what in message, message
    assert "instances.json" in message or "missing.jpg" in message


def test_coco_skip_bad_counts_images_and_orphan_annotations(coco):
    path, image_dir, data = coco
    data["annotations"][0]["category_id"] = 99
    data["annotations"].append(dict(data["annotations"][1], id=999, image_id=4321))
    rewrite_json(path, data)
    with pytest.warns(UserWarning, match=r"skipped 2 bad records; first: .*annotations\[\d+\] "
                                         r"names no known image") as caught:
        dataset = COCODataset(path, image_dir, skip_bad=True)
    assert len(caught) == 1 and len(dataset) == 9 and 1 not in dataset.image_ids


@pytest.fixture
def lst(voc):
    """The path of a freshly written ``train.lst`` (with .rec, .idx, .classes.txt) in the root
    of a VOC folder, so that its image paths are relative to its own folder."""
    prefix = os.path.join(voc, "train")
    assert zoo_main(["prepare-data", "--format", "voc", "--root", voc, "--image-set", "train",
                    "--output", prefix]) == 0
    return prefix + ".lst"


def edit_line(path, number, edit):
    """Apply ``edit`` to line ``number`` (1-based) of a text file."""
    with open(path) as stream:
        lines = stream.readlines()
    lines[number - 1] = edit(lines[number - 1])
    with open(path, "w") as stream:
        stream.writelines(lines)


LST_FAULTS = [
    (lambda line: line.replace("\t", "\tx", 1), "not a number"),
    (lambda line: line.replace("\t6\t", "\t7\t", 1), "not a multiple of the label width 7"),
    (lambda line: line.replace("\t6\t", "\t6\t9", 1), "unknown class id"),
    (lambda line: line.replace("\t2\t", "\t1\t", 1), "header width 1"),
    (lambda line: line.split("\t")[0] + "\n", "got 1 fields"),
    (lambda line: line.replace(".jpg", ".png"), "No such file"),
]


@pytest.mark.parametrize("edit, what", LST_FAULTS)
def test_lst_fault_names_file_and_line(lst, edit, what):
    edit_line(lst, 3, edit)
    with pytest.raises(DataError) as caught:
        LstDataset(lst)
    message = str(caught.value)
    assert "\n" not in message and what in message, message
    assert "train.lst:3:" in message


def test_lst_skip_bad_counts_lines(lst):
    edit_line(lst, 2, lambda line: line.replace("\t", "\tx", 1))
    edit_line(lst, 5, lambda line: line.replace("\t6\t", "\t7\t", 1))
    with pytest.warns(UserWarning, match=r"train\.lst: skipped 2 bad records; first: "
                                         r".*train\.lst:2: not a number"):
        dataset = LstDataset(lst, skip_bad=True)
    assert len(dataset) == 8


def test_record_file_faults(lst):
    prefix = lst[:-len(".lst")]
    os.remove(prefix + ".classes.txt")
    with pytest.raises(DataError, match="no class names: pass class_names="):
        RecordDataset(prefix + ".rec")
    assert len(RecordDataset(prefix + ".rec", class_names=embedded.CLASSES)) == 10
    with pytest.raises(DataError, match=r"unknown class id \d \(1 classes\)"):
        RecordDataset(prefix + ".rec", class_names=["circle"]).records
    truncate(prefix + ".rec", keep=0.97)
    truncated = RecordDataset(prefix + ".rec", class_names=embedded.CLASSES)
    with pytest.raises(DataError, match=r"train\.rec: record 9: unreadable record: .*Invalid "
                                        r"RecordIO File"):
        truncated[9]
    os.remove(prefix + ".idx")
    with pytest.raises(DataError, match=r"train\.idx: no such file"):
        RecordDataset(prefix + ".rec", class_names=embedded.CLASSES)
