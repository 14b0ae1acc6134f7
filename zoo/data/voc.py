"""Pascal VOC folders: ``Annotations/*.xml``, ``JPEGImages/*``, ``ImageSets/Main/*.txt``,
and optionally ``classes.txt``.

An annotation's image is the file its ``<filename>`` names in ``JPEGImages`` (any type
the zoo reads: JPEG, PNG, BMP, TIFF, WebP), else ``JPEGImages/<id>.jpg`` or another such
type of the same stem. The classes are ``classes.txt``'s, one name a line, in that order;
without it, the names the annotations use, in alphabetical order (which for Pascal VOC
itself are its 20 classes), said in one log line.

VOC coordinates are 1-based; like GluonCV, the reader subtracts 1 from each, and
:func:`annotation_xml` adds it back, so written boxes read back unchanged.
"""
import dataclasses
import functools
import logging
import os
from xml.sax.saxutils import escape

import defusedxml
import defusedxml.ElementTree as ElementTree

from zoo.data.conventions import INCLUSIVE
from zoo.data.dataset import DetectionDataset, contained_path, read_class_names
from zoo.data.orientation import FramePolicy
from zoo.data.records import SkipPolicy, data_error, make_record
from zoo.errors import DataError

__all__ = ["CLASS_FILE", "IMAGE_TYPES", "VOCDataset", "VOC_CLASSES", "annotation_class_names",
           "annotation_xml", "default_class_names", "number", "text"]

LOG = logging.getLogger(__name__)

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
               "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
               "sheep", "sofa", "train", "tvmonitor")

CLASS_FILE = "classes.txt"
"""A dataset's own class list at its root, one name per line; VOCDataset uses it when present."""

IMAGE_TYPES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
"""The image files a VOC folder may hold (those the zoo decodes), its own ``.jpg`` first."""


class VOCDataset(DetectionDataset):
    """A Pascal VOC folder.

    ``image_set`` names a list in ``ImageSets/Main`` (``"trainval"``,
    ``"test"``, ...) or is a list of image ids. ``class_names`` default to the
    root's ``classes.txt`` if it has one, else to the classes its annotations use
    (:func:`default_class_names`); an object of another class is an error. Each image is
    the file its annotation's ``<filename>`` names (see the module's docstring).
    Annotations and image files are checked here
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
        names, self.class_source = class_list(root, class_names)
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
        images = os.path.join(self.root, "JPEGImages")
        contained_path(images, image_id, self.source, "image id")
        xml_path = os.path.join(self.root, "Annotations", image_id + ".xml")
        root = parse_xml(xml_path)
        image_path = find_image(images, image_id, root, xml_path)
        record = annotation_record(root, xml_path, image_path, class_index, key=image_id,
                                   class_source=self.class_source)
        return dataclasses.replace(record, orientation=self.frames.frame(image_path, record))


def find_image(images, image_id, root, xml_path):
    """The image file of an annotation (its parsed ``root``): the one its ``<filename>``
    names in ``images``, else ``<id>`` with the first of :data:`IMAGE_TYPES` found. None
    found is a :class:`DataError` naming the file the annotation names."""
    filename = (root.findtext("filename") or "").strip()
    named = contained_path(images, filename, xml_path, "<filename>") if filename else None
    if named is not None and os.path.isfile(named):
        return named
    stem = os.path.join(images, image_id)
    for extension in IMAGE_TYPES:
        if os.path.isfile(stem + extension):
            return stem + extension
    if named is not None:
        raise data_error(xml_path, "image %s (its <filename>): No such file (nor %s with "
                         "another image extension)" % (named, image_id))
    raise data_error(xml_path, "image %s.jpg: No such file (nor %s, and no <filename> "
                     "naming another)" % (stem, "/".join(IMAGE_TYPES[1:])))


def class_file_path(root):
    return os.path.join(root, CLASS_FILE)


def default_class_names(root):
    """The class names in ``root/classes.txt`` if present, else those the annotations of
    ``root/Annotations`` use (:func:`annotation_class_names`)."""
    return class_list(root)[0]


def class_list(root, class_names=None):
    """``(names, source)``: ``class_names`` if given (source None), else ``classes.txt``'s
    (source its path), else the annotations' (source ``"annotations"``)."""
    if class_names is not None:
        return list(class_names), None
    path = class_file_path(root)
    if os.path.isfile(path):
        return read_class_names(path), path
    folder = os.path.join(root, "Annotations")
    stamp = os.stat(folder).st_mtime_ns if os.path.isdir(folder) else None
    return list(annotation_class_names(root, stamp)), "annotations"


@functools.lru_cache(maxsize=16)
def annotation_class_names(root, stamp=None):
    """The object names of every annotation in ``root/Annotations``, in alphabetical order,
    logged in one line (once per folder and ``stamp``, its modification time: the
    training and validation splits share the list); a :class:`DataError` saying how to name
    the classes if there is none. A file that does not parse is passed over here: its
    split reports it."""
    folder = os.path.join(root, "Annotations")
    names = set()
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in files:
        if name.endswith(".xml"):
            try:
                names.update(object_names(parse_xml(os.path.join(folder, name))))
            except DataError:
                continue
    if not names:
        raise data_error(root, "no %s, and no <object> in %s to read the class names from: "
                         "list them in %s, one a line" % (CLASS_FILE, folder,
                                                          class_file_path(root)))
    names = tuple(sorted(names))
    LOG.info("%s has no %s: its %d classes, read from its annotations in alphabetical order: "
             "%s (list them in %s, one a line, to choose them and their order)",
             root, CLASS_FILE, len(names), ", ".join(names), class_file_path(root))
    return names


def object_names(root):
    """The class names of an annotation's objects (parsed ``root``)."""
    return {(obj.findtext("name") or "").strip() for obj in root.iter("object")} - {""}


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
    return annotation_record(parse_xml(xml_path), xml_path, image_path, class_index, key)


def annotation_record(root, xml_path, image_path, class_index, key=None, class_source=None):
    """The :class:`Record` of a parsed VOC annotation (``root``); :class:`DataError` on any
    fault. ``class_source``: where the class names came from (a ``classes.txt`` path), for
    the message about an object of another class."""
    width = number(root, "size/width", xml_path)
    height = number(root, "size/height", xml_path)
    boxes, class_ids, difficult = [], [], []
    for index, obj in enumerate(root.iter("object")):
        name = text(obj, "name", xml_path, index).strip()
        if name not in class_index:
            raise unknown_class(xml_path, index, name, class_index, class_source)
        class_ids.append(class_index[name])
        boxes.append([number(obj, "bndbox/" + tag, xml_path, index) - 1
                      for tag in ("xmin", "ymin", "xmax", "ymax")])
        difficult.append(difficult_flag(obj, xml_path, index))
    return make_record(xml_path, image_path, width, height, boxes, class_ids, difficult, key,
                       corner_names=("xmax", "ymax"))


def unknown_class(xml_path, index, name, class_index, class_source):
    """The :class:`DataError` of an object whose class is not one of ``class_index``'s: its
    way out is the class list (``classes.txt``), not skipping every image that has one."""
    listed = class_source and class_source != "annotations"
    error = data_error(xml_path, "object %d: unknown class %r: not %s (%s)%s" % (
        index, name, "in " + class_source if listed else "one of the classes asked for",
        ", ".join(class_index), ": add it there, one name a line" if listed else ""))
    error.skip_hint = False
    return error


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
