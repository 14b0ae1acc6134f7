"""Pascal VOC folders: ``Annotations/*.xml``, ``JPEGImages/*.jpg``, ``ImageSets/Main/*.txt``.

VOC coordinates are 1-based; like GluonCV, the reader subtracts 1 from each, and
:func:`annotation_xml` adds it back, so written boxes read back unchanged.
"""
import dataclasses
import os
from xml.sax.saxutils import escape

import defusedxml
import defusedxml.ElementTree as ElementTree

from zoo.data.conventions import INCLUSIVE
from zoo.data.dataset import DetectionDataset, contained_path, read_class_names
from zoo.data.orientation import FramePolicy
from zoo.data.records import SkipPolicy, data_error, make_record

__all__ = ["CLASS_FILE", "VOCDataset", "VOC_CLASSES", "annotation_xml", "default_class_names",
           "number", "text"]

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
               "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
               "sheep", "sofa", "train", "tvmonitor")

CLASS_FILE = "classes.txt"
"""A dataset's own class list at its root, one name per line; VOCDataset uses it when present."""


class VOCDataset(DetectionDataset):
    """A Pascal VOC folder.

    ``image_set`` names a list in ``ImageSets/Main`` (``"trainval"``,
    ``"test"``, ...) or is a list of image ids. ``class_names`` default to the
    root's ``classes.txt`` if it has one, else the 20 VOC classes; an object of
    another class is an error. Annotations and image files are checked here
    (bad ones raise :class:`DataError`, or are skipped with one warning when
    ``skip_bad``); pixels are decoded, and checked, by ``dataset[i]``.
    """

    def __init__(self, root, image_set="trainval", class_names=None, skip_bad=False):
        if not os.path.isdir(root):
            raise data_error(root, "not a VOC folder (no such directory)")
        self.root = root
        if isinstance(image_set, str):
            ids, source = read_image_set(root, image_set), image_set_path(root, image_set)
        else:
            ids, source = list(image_set), root
        names = list(class_names) if class_names is not None else default_class_names(root)
        class_index = {name: index for index, name in enumerate(names)}
        self.source = source
        policy, self.frames = SkipPolicy(skip_bad, source), FramePolicy(source)
        records = policy.parse_each(ids, lambda image_id: self._load(image_id, class_index))
        self.frames.finish()
        self.listed = len(ids)
        super().__init__(policy.finish(records), names, INCLUSIVE)

    def _load(self, image_id, class_index):
        """Parse one image's annotation and check its image file's header (its size, and
        the frame the annotation was drawn in)."""
        contained_path(os.path.join(self.root, "JPEGImages"), image_id, self.source, "image id")
        image_path = os.path.join(self.root, "JPEGImages", image_id + ".jpg")
        xml_path = os.path.join(self.root, "Annotations", image_id + ".xml")
        record = parse_annotation(xml_path, image_path, class_index, key=image_id)
        return dataclasses.replace(record, orientation=self.frames.frame(image_path, record))


def default_class_names(root):
    """The class names in ``root/classes.txt`` if present, else the 20 VOC classes."""
    path = os.path.join(root, CLASS_FILE)
    return read_class_names(path) if os.path.isfile(path) else list(VOC_CLASSES)


def image_set_path(root, name):
    """The file listing image set ``name``."""
    return os.path.join(root, "ImageSets", "Main", "%s.txt" % name)


def read_image_set(root, name):
    """Image ids listed in ``ImageSets/Main/<name>.txt`` (first column of each line)."""
    path = image_set_path(root, name)
    try:
        with open(path, encoding="utf-8") as stream:
            return [line.split()[0] for line in stream if line.strip()]
    except FileNotFoundError:
        main = os.path.join(root, "ImageSets", "Main")
        known = sorted(f[:-4] for f in os.listdir(main) if f.endswith(".txt")) \
            if os.path.isdir(main) else []
        raise data_error(path, "no image set %r; available: %s"
                         % (name, ", ".join(known) or "none"))
    except (OSError, UnicodeDecodeError) as err:
        raise data_error(path, "cannot read image set: %s" % err)


def parse_annotation(xml_path, image_path, class_index, key=None):
    """The :class:`Record` of one VOC XML file; :class:`DataError` on any fault."""
    root = parse_xml(xml_path)
    width = number(root, "size/width", xml_path)
    height = number(root, "size/height", xml_path)
    boxes, class_ids, difficult = [], [], []
    for index, obj in enumerate(root.iter("object")):
        name = text(obj, "name", xml_path, index).strip()
        if name not in class_index:
            raise data_error(xml_path, "object %d: unknown class %r (known: %s)"
                             % (index, name, ", ".join(class_index)))
        class_ids.append(class_index[name])
        boxes.append([number(obj, "bndbox/" + tag, xml_path, index) - 1
                      for tag in ("xmin", "ymin", "xmax", "ymax")])
        difficult.append(difficult_flag(obj, xml_path, index))
    return make_record(xml_path, image_path, width, height, boxes, class_ids, difficult, key,
                       corner_names=("xmax", "ymax"))


def parse_xml(path):
    """The root element of an XML file, parsed safely; :class:`DataError` naming the line."""
    try:
        if os.path.getsize(path) == 0:
            raise data_error(path, "empty annotation file")
        return ElementTree.parse(path).getroot()
    except ElementTree.ParseError as err:
        line, column = err.position
        raise data_error(path, "malformed XML at column %d: %s"
                         % (column, str(err).split(":")[0]), line=line)
    except defusedxml.DefusedXmlException as err:
        raise data_error(path, "forbidden XML construct: %s" % err)
    except OSError as err:
        raise data_error(path, "cannot read annotation: %s" % (err.strerror or err))


def text(element, tag, source, index=None):
    """The text of ``element``'s child at path ``tag``; :class:`DataError` if it is missing."""
    child = element.find(tag)
    if child is None or not (child.text or "").strip():
        raise data_error(source, "%smissing <%s>" % (object_prefix(index), tag.replace("/", "><")))
    return child.text


def number(element, tag, source, index=None):
    """The number at ``tag`` under ``element``; :class:`DataError` if missing or not numeric."""
    value = text(element, tag, source, index)
    try:
        return float(value)
    except ValueError:
        raise data_error(source, "%s<%s> is %r, not a number"
                         % (object_prefix(index), tag.replace("/", "><"), value.strip()))


def difficult_flag(obj, source, index):
    """An object's ``<difficult>`` flag: 0 when absent, else it must be 0 or 1."""
    if obj.find("difficult") is None:
        return 0
    value = text(obj, "difficult", source, index).strip()
    if value not in ("0", "1"):
        raise data_error(source, "object %d: <difficult> is %r, not 0 or 1" % (index, value))
    return int(value)


def object_prefix(index):
    """``"object N: "`` for messages about object ``index``, or nothing for image fields."""
    return "" if index is None else "object %d: " % index


def annotation_xml(filename, width, height, objects):
    """A VOC annotation as XML text.

    ``objects`` are ``(class_name, (x1, y1, x2, y2), difficult)`` with the box in
    0-based pixels; coordinates are rounded and shifted to VOC's 1-based grid.
    """
    parts = ["<annotation>\n", "  <folder>VOC</folder>\n",
             "  <filename>%s</filename>\n" % escape(filename),
             "  <size><width>%d</width><height>%d</height><depth>3</depth></size>\n"
             % (width, height)]
    for name, box, difficult in objects:
        corners = "".join("<%s>%d</%s>" % (tag, round(value) + 1, tag)
                          for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), box))
        parts.append("  <object><name>%s</name><difficult>%d</difficult><bndbox>%s</bndbox>"
                     "</object>\n" % (escape(name), int(difficult), corners))
    parts.append("</annotation>\n")
    return "".join(parts)
