"""COCO detection annotations, indexed by pycocotools' COCO API.

Boxes ``[x, y, w, h]`` become corners ``[x, y, x + w, y + h]``; category ids map
to contiguous class ids in sorted category-id order; crowd regions are marked
difficult so VOC-style metrics ignore them. The COCO object, image ids and the
category map are kept so predictions can be written back as COCO results.
"""
import contextlib
import dataclasses
import io
import json
import os

from pycocotools.coco import COCO

from zoo.schema.checks import is_number
from zoo.data.dataset import DetectionDataset, contained_path
from zoo.data.orientation import FramePolicy
from zoo.data.records import SkipPolicy, data_error, make_record

__all__ = ["COCODataset", "load_json"]


class COCODataset(DetectionDataset):
    """A COCO annotation file and its image folder.

    Annotations and image files are checked here (bad images raise
    :class:`DataError`, or are skipped with one warning when ``skip_bad``);
    pixels are decoded, and checked, by ``dataset[i]``. Images without
    annotations are kept: they are valid negatives and part of the evaluation.

    ``coco`` is pycocotools' index (skipped images included, so evaluate on
    ``image_ids``); ``category_ids[class_id]`` is the COCO category of a class
    and ``class_of_category`` the reverse map.
    """

    def __init__(self, annotation_json, image_dir, skip_bad=False):
        self.annotation_json, self.image_dir = annotation_json, image_dir
        if not os.path.isdir(image_dir):
            raise data_error(image_dir, "no such image folder (the folder the file_name "
                             "entries of %s are under)" % annotation_json)
        self.source = annotation_json
        data = load_json(annotation_json)
        categories = parse_categories(data, annotation_json)
        self.category_ids = [category_id for category_id, _ in categories]
        self.class_of_category = {cid: index for index, cid in enumerate(self.category_ids)}
        policy, self.frames = SkipPolicy(skip_bad, annotation_json), FramePolicy(annotation_json)
        self.coco = build_index(data, policy, annotation_json)
        records = policy.parse_each(sorted(self.coco.imgs), self._load)
        self.frames.finish()
        self.listed = len(data["images"])
        super().__init__(policy.finish(records), [name for _, name in categories])

    def result_ids(self):
        """``(image ids, category ids)`` COCO results name the records and classes by:
        the file's own."""
        return self.image_ids, list(self.category_ids)

    def ground_truth(self):
        """The file's COCO dict on the records' images (a skipped image is not scored);
        an annotation without ``area`` gets its box's, which COCOeval needs."""
        kept = set(self.image_ids)
        annotations = [dict(ann, area=ann.get("area", ann["bbox"][2] * ann["bbox"][3]))
                       for ann in self.coco.dataset["annotations"] if ann["image_id"] in kept]
        return {"images": [image for image in self.coco.dataset["images"]
                           if image["id"] in kept],
                "annotations": annotations, "categories": self.coco.dataset["categories"]}

    def _load(self, image_id):
        """The record of one image: its entry, its annotations and its file checked."""
        source = "%s: image id %s" % (self.annotation_json, image_id)
        entry = self.coco.imgs[image_id]
        for field in ("width", "height"):
            if not is_number(entry.get(field)):
                raise data_error(source, "%s is %r, not a number" % (field, entry.get(field)))
        if not isinstance(entry.get("file_name"), str) or not entry["file_name"]:
            raise data_error(source, "no file_name")
        boxes, class_ids, difficult = [], [], []
        for ann in self.coco.imgToAnns[image_id]:
            class_ids.append(self._class_id(ann, source))
            boxes.append(corner_box(ann, source))
            difficult.append(crowd_flag(ann, source))
        path = contained_path(self.image_dir, entry["file_name"], source, "file_name")
        record = make_record(source, path, entry["width"], entry["height"], boxes, class_ids,
                             difficult, key=image_id)
        return dataclasses.replace(record, orientation=self.frames.frame(path, record))

    def _class_id(self, ann, source):
        """The contiguous class id of an annotation's category."""
        if ann["category_id"] not in self.class_of_category:
            raise data_error(source, "annotation id %s: unknown category id %r"
                             % (ann.get("id"), ann["category_id"]))
        return self.class_of_category[ann["category_id"]]


def load_json(path):
    """A JSON file's top-level object; :class:`DataError` naming the line of a syntax error."""
    try:
        if os.path.getsize(path) == 0:
            raise data_error(path, "empty annotation file")
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except json.JSONDecodeError as err:
        raise data_error(path, "malformed JSON at column %d: %s" % (err.colno, err.msg),
                         line=err.lineno)
    except UnicodeDecodeError as err:
        raise data_error(path, "not UTF-8 text: %s" % err.reason)
    except OSError as err:
        raise data_error(path, "cannot read annotations: %s" % (err.strerror or err))
    if not isinstance(data, dict):
        raise data_error(path, "not a COCO annotation file (top level is not an object)")
    for key in ("images", "categories"):
        if not isinstance(data.get(key), list):
            raise data_error(path, "not a COCO annotation file (no %r list)" % key)
    if not isinstance(data.get("annotations", []), list):
        raise data_error(path, "'annotations' is not a list")
    return data


def parse_categories(data, source):
    """``[(category_id, name)]`` sorted by id; :class:`DataError` on a malformed category."""
    categories = {}
    for position, category in enumerate(data["categories"]):
        if not isinstance(category, dict) or not isinstance(category.get("id"), int) \
                or not isinstance(category.get("name"), str):
            raise data_error(source, "categories[%d] needs an integer id and a name" % position)
        if category["id"] in categories:
            raise data_error(source, "category id %d appears twice" % category["id"])
        check_new_name(categories, category, source)
        categories[category["id"]] = category["name"]
    if not categories:
        raise data_error(source, "no categories")
    return sorted(categories.items())


def check_new_name(categories, category, source):
    """:class:`DataError` if ``category``'s name is already one of ``categories`` (id ->
    name): a model's classes are told apart by name."""
    for known_id, name in categories.items():
        if name == category["name"]:
            raise data_error(source, "category name %r appears twice (ids %d and %d): class "
                             "names must be unique" % (name, known_id, category["id"]))


def build_index(data, policy, source):
    """pycocotools' COCO index over the entries it can index.

    Images without an integer id and annotations that name no known image
    cannot be attributed to a record; each goes to ``policy`` as a bad record.
    """
    images = []
    for position, image in enumerate(data["images"]):
        if isinstance(image, dict) and isinstance(image.get("id"), int):
            images.append(image)
        else:
            policy.reject(data_error(source, "images[%d] has no integer id" % position))
    image_ids = {image["id"] for image in images}
    if len(image_ids) != len(images):
        raise data_error(source, "repeated image ids")
    annotations = []
    for position, ann in enumerate(data.get("annotations", [])):
        if not isinstance(ann, dict) or ann.get("image_id") not in image_ids:
            policy.reject(data_error(source, "annotations[%d] names no known image (image_id %r)"
                                     % (position, ann.get("image_id")
                                        if isinstance(ann, dict) else None)))
        elif not isinstance(ann.get("category_id"), int):  # pycocotools indexes by it
            policy.reject(data_error(source, "image id %s: annotation id %s has no integer "
                                     "category_id" % (ann["image_id"], ann.get("id"))))
            image_ids.discard(ann["image_id"])
        else:
            annotations.append(ann)
    coco = COCO()
    coco.dataset = dict(data, images=[image for image in images if image["id"] in image_ids],
                        annotations=[ann for ann in annotations if ann["image_id"] in image_ids])
    with contextlib.redirect_stdout(io.StringIO()):  # createIndex prints progress
        coco.createIndex()
    return coco


def corner_box(ann, source):
    """An annotation's ``[x, y, w, h]`` box as corners ``[x1, y1, x2, y2]``."""
    bbox = ann.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(map(is_number, bbox)):
        raise data_error(source, "annotation id %s: bbox %r is not [x, y, w, h]"
                         % (ann.get("id"), bbox))
    x, y, width, height = bbox
    return [x, y, x + width, y + height]


def crowd_flag(ann, source):
    """An annotation's ``iscrowd`` (0 when absent), used as the difficult flag."""
    crowd = ann.get("iscrowd", 0)
    if crowd not in (0, 1):
        raise data_error(source, "annotation id %s: iscrowd is %r, not 0 or 1"
                         % (ann.get("id"), crowd))
    return crowd
