"""The dataset interface shared by every reader."""
import os
from concurrent.futures import ThreadPoolExecutor

from zoo.data.conventions import CONTINUOUS, check_box_convention
from zoo.data.images import read_image
from zoo.data.orientation import orient
from zoo.data.records import SkipPolicy, check_image_size, data_error

__all__ = ["DetectionDataset", "contained_path", "read_class_names",
           "write_class_names"]


class DetectionDataset:
    """Images on disk with their ground truth.

    ``records`` holds every image's annotations (so evaluation needs no
    decoding); ``dataset[i]`` decodes image ``i`` and returns ``(image,
    label)``: an HxWx3 uint8 RGB array and an (M, 6) float32 label
    ``[class_id, x1, y1, x2, y2, difficult]`` in pixels. ``box_convention`` says
    what the corners mean (see :mod:`zoo.data.conventions`).
    """

    source = None
    """What names the dataset in skip warnings (its list or annotation file); readers set it."""
    listed = None
    """How many images the source lists; with ``skip_bad`` the bad ones are not among
    ``records``. Readers set it (None: as many as ``records``, see :meth:`dropped`)."""

    category_ids = None
    """The format's own category id of each class (a COCO file's), or None: a model trained
    on the dataset records them (its config's ``category_ids``)."""

    def __init__(self, records, class_names, box_convention=CONTINUOUS):
        self.records = records
        self.class_names = list(class_names)
        self.box_convention = check_box_convention(box_convention)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, index):
        record = self.records[index]
        image = orient(read_image(record.path), record.orientation)
        check_image_size(image.shape[1], image.shape[0], record, record.path)
        return image, record.label()

    def image_path(self, index):
        """The image file of item ``index``."""
        return self.records[index].path

    def verify(self, skip_bad=False, num_workers=None):
        """Decode every image once, as ``dataset[i]`` does (size against the annotation,
        pixel limit, any damage libjpeg notices), so that a bad image is found before
        training starts rather than after an epoch. Raises the first :class:`DataError`;
        with ``skip_bad`` drops every bad image from the dataset, warns once with the count
        and the first reason, and returns the number dropped."""
        with ThreadPoolExecutor(num_workers or os.cpu_count() or 1) as pool:
            checks = [pool.submit(self._check_item, index) for index in range(len(self))]
            policy = SkipPolicy(skip_bad, self.source or repr(self))
            keep = policy.parse_each(checks, lambda check: check.result())
        dropped = len(self) - len(keep)
        if dropped:
            self._keep_items(keep)
        policy.finish(keep)
        return dropped

    def dropped(self):
        """How many of the images the source lists ``skip_bad`` dropped, when the dataset
        was opened and by :meth:`verify`."""
        return 0 if self.listed is None else self.listed - len(self.records)

    def _check_item(self, index):
        """Decode item ``index`` (the pixels are dropped at once); returns the index."""
        self[index]
        return index

    def _keep_items(self, indices):
        """Keep only the items at ``indices``, in order."""
        self.records = [self.records[index] for index in indices]

    def result_ids(self):
        """``(image ids, category ids)`` COCO results name the records and classes by:
        record indices and class id + 1 (a COCO file's own ids for its dataset)."""
        return list(range(len(self))), list(range(1, len(self.class_names) + 1))

    def ground_truth(self):
        """The format's own COCO ground truth (a dict), or None to make it from the
        records."""
        return None

    def file_names(self):
        """What names each record's image in results: its file, else its key."""
        return [record.path if record.path else str(record.key) for record in self.records]

    @property
    def image_ids(self):
        """The format's own image ids (VOC ids, COCO image ids, .lst indices), in order."""
        return [record.key for record in self.records]

    def __repr__(self):
        return "%s(%d images, %d classes)" % (type(self).__name__, len(self),
                                             len(self.class_names))


def contained_path(root, entry, source, what):
    """``root/entry``, normalised; :class:`DataError` naming ``source`` and the entry if it
    is absolute or climbs out of ``root`` with ``..``. The check is on the path as written,
    not on where symbolic links lead, so a folder the dataset's owner linked in (images on
    another disk) still reads."""
    if os.path.isabs(entry):
        raise data_error(source, "%s %r is an absolute path; it must be relative to %s"
                         % (what, entry, root))
    base = os.path.abspath(root)
    path = os.path.normpath(os.path.join(base, entry))
    if os.path.commonpath([base, path]) != base:
        raise data_error(source, "%s %r climbs out of %s" % (what, entry, root))
    return os.path.normpath(os.path.join(root, entry))


def read_class_names(path):
    """Class names from a text file, one per line (blank lines ignored)."""
    try:
        with open(path, encoding="utf-8") as stream:
            names = [line.strip() for line in stream if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise data_error(path, "cannot read class names: %s" % err)
    if not names:
        raise data_error(path, "no class names")
    if len(set(names)) != len(names):
        raise data_error(path, "repeated class names")
    return names


def write_class_names(path, class_names):
    """Write class names one per line, as :func:`read_class_names` reads them."""
    with open(path, "w", encoding="utf-8") as stream:
        stream.write("".join("%s\n" % name for name in class_names))
