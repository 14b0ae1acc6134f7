"""MXNet ``.lst`` / ``.rec`` files in the im2rec detection format.

A label is ``[header_width, label_width, obj_0, obj_1, ...]`` with each object
``[class_id, x1, y1, x2, y2, difficult]`` and coordinates normalised to [0, 1],
as ``mx.image.ImageDetIter`` and GluonCV's ``RecordFileDetection`` read it.
We write ``header_width = 2`` and ``label_width = 6``; readers accept any
header width >= 2 and label width >= 5 (difficult is 0 when the column is
absent). Class names travel beside the files in ``PREFIX.classes.txt``.
"""
import os
import threading

import mxnet as mx
import numpy as np

from zoo.errors import DataError
from zoo.data.conventions import read_box_convention, write_box_convention
from zoo.data.dataset import (DetectionDataset, contained_path, read_class_names,
                              write_class_names)
from zoo.data.images import check_image_file, decode_image, image_size, read_image_bytes
from zoo.data.records import LABEL_WIDTH, SkipPolicy, check_image_size, data_error, make_record

__all__ = ["LstDataset", "RecordDataset", "pack", "write_record_files"]

HEADER_WIDTH = 2


def class_file(prefix):
    """The class-names file written beside ``PREFIX.lst`` / ``PREFIX.rec``."""
    return prefix + ".classes.txt"


def class_names_beside(path, class_names):
    """``class_names`` if given, else those in the class file beside ``path``."""
    if class_names is not None:
        return list(class_names)
    names_path = class_file(os.path.splitext(path)[0])
    if not os.path.isfile(names_path):
        raise data_error(path, "no class names: pass class_names= or write %s" % names_path)
    return read_class_names(names_path)


def encode_label(record):
    """A record's flat float32 im2rec label, coordinates normalised by its image size."""
    scale = np.array([record.width, record.height] * 2, dtype=np.float64)
    objects = np.column_stack([record.class_ids, record.boxes / scale, record.difficult])
    return np.concatenate([[HEADER_WIDTH, LABEL_WIDTH], objects.ravel()]).astype(np.float32)


def decode_label(values, source, num_classes):
    """The normalised (M, 6) label of a flat im2rec label; :class:`DataError` if malformed."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size < 2 or not np.all(np.isfinite(values)):
        raise data_error(source, "label needs finite [header_width, label_width, objects...]")
    header_width, label_width = values[:2]
    if header_width != int(header_width) or not 2 <= header_width <= values.size:
        raise data_error(source, "label header width %g is not an integer in [2, %d]"
                         % (header_width, values.size))
    if label_width != int(label_width) or label_width < 5:
        raise data_error(source, "label width %g is not an integer >= 5" % label_width)
    body = values[int(header_width):]
    if body.size % int(label_width):
        raise data_error(source, "label has %d values after its header, not a multiple of the "
                         "label width %d" % (body.size, label_width))
    objects = body.reshape(-1, int(label_width))
    difficult = objects[:, 5] if label_width >= 6 else np.zeros(len(objects))
    for index, (class_id, flag) in enumerate(zip(objects[:, 0], difficult)):
        if class_id != int(class_id) or not 0 <= class_id < num_classes:
            raise data_error(source, "object %d: unknown class id %g (%d classes)"
                             % (index, class_id, num_classes))
        if flag not in (0, 1):
            raise data_error(source, "object %d: difficult is %g, not 0 or 1" % (index, flag))
    return np.column_stack([objects[:, :5], difficult]).reshape(-1, LABEL_WIDTH)


def normalised_record(source, path, width, height, label, key):
    """The pixel :class:`Record` of a normalised (M, 6) label on a ``width`` x ``height`` image."""
    scale = np.array([width, height] * 2, dtype=np.float64)
    return make_record(source, path, width, height, label[:, 1:5] * scale, label[:, 0],
                       label[:, 5], key=key)


class LstDataset(DetectionDataset):
    """Images listed in an MXNet ``.lst`` file (``index<TAB>label...<TAB>path`` per line).

    Paths are relative to ``image_root`` (default: the ``.lst`` file's folder, as
    im2rec lists are) and must stay inside it. Image sizes are read from the image
    headers, so ``records`` are in pixels.
    """

    def __init__(self, lst_path, image_root=None, class_names=None, skip_bad=False):
        self.lst_path = self.source = lst_path
        self.image_root = os.path.dirname(lst_path) if image_root is None else image_root
        names = class_names_beside(lst_path, class_names)
        try:
            with open(lst_path, encoding="utf-8") as stream:
                lines = [(number, line) for number, line in enumerate(stream, 1) if line.strip()]
        except (OSError, UnicodeDecodeError) as err:
            raise data_error(lst_path, "cannot read list: %s" % err)
        policy = SkipPolicy(skip_bad, lst_path)
        self.listed = len(lines)
        records = policy.parse_each(lines, lambda line: self._parse_line(*line, len(names)))
        super().__init__(policy.finish(records), names, read_box_convention(lst_path))

    def _parse_line(self, number, line, num_classes):
        """The record of one ``.lst`` line, its image file checked."""
        source = "%s:%d" % (self.lst_path, number)
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) < 4:
            raise data_error(self.lst_path, "expected index, label values and path separated "
                             "by tabs, got %d fields" % len(fields), line=number)
        try:
            key = int(fields[0])
            values = [float(value) for value in fields[1:-1]]
        except ValueError as err:
            raise data_error(self.lst_path, "not a number: %s" % err, line=number)
        label = decode_label(values, source, num_classes)
        path = contained_path(self.image_root, fields[-1], source, "image path")
        try:
            _, width, height = check_image_file(path)
        except DataError as err:
            raise data_error(source, str(err)) from None
        return normalised_record(source, path, width, height, label, key)


class RecordDataset(DetectionDataset):
    """Images and labels packed in an indexed RecordIO file (``.rec`` with ``.idx`` beside it).

    Items are read on demand; ``records`` reads every label and image header
    once, on first use. Safe to read from several threads. With ``skip_bad``, the
    first use of ``records`` drops the records it cannot read from the dataset (its
    length changes), with one warning; :meth:`verify` also decodes every image.
    """

    def __init__(self, rec_path, class_names=None, skip_bad=False):
        # records are read lazily, so the base initialiser, which takes them, is not used
        self.rec_path = self.source = rec_path
        self.skip_bad = skip_bad
        self.idx_path = os.path.splitext(rec_path)[0] + ".idx"
        for path in (rec_path, self.idx_path):
            if not os.path.isfile(path):
                raise data_error(path, "no such file")
        self.class_names = class_names_beside(rec_path, class_names)
        self.box_convention = read_box_convention(rec_path)
        self.keys = read_index_keys(self.idx_path)
        self.listed = len(self.keys)
        self._reader = mx.recordio.MXIndexedRecordIO(self.idx_path, rec_path, "r")
        self._lock = threading.Lock()  # the reader seeks and reads one shared file handle
        self._records = None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, index):
        source, label, data = self._read(index)
        image = decode_image(data, source)
        height, width = image.shape[:2]
        return image, normalised_record(source, None, width, height, label,
                                        self.keys[index]).label()

    @property
    def records(self):
        """Every image's record, read from the file (labels and image headers) on first use."""
        if self._records is None:
            policy = SkipPolicy(self.skip_bad, self.rec_path)
            read = policy.parse_each(range(len(self)),
                                     lambda index: (index, self._header_record(index)))
            records = policy.finish([record for _, record in read])
            self.keys, self._records = [self.keys[index] for index, _ in read], records
        return self._records

    def _keep_items(self, indices):
        """Keep only the items at ``indices``, in order."""
        if self._records is not None:
            self._records = [self._records[index] for index in indices]
        self.keys = [self.keys[index] for index in indices]

    def image_path(self, index):
        """None: the images live inside the record file."""
        return None

    @property
    def image_ids(self):
        """The record keys, in order (without reading the records)."""
        return list(self.keys)

    def _header_record(self, index):
        """Record ``index`` with its image size taken from the image header, without decoding."""
        source, label, data = self._read(index)
        width, height = image_size(data, source)
        return normalised_record(source, None, width, height, label, self.keys[index])

    def _read(self, index):
        """``(source, normalised label, image bytes)`` of item ``index``."""
        key = self.keys[index]
        source = "%s: record %d" % (self.rec_path, key)
        try:
            with self._lock:
                packed = self._reader.read_idx(key)
            header, data = mx.recordio.unpack(packed)
        except (mx.base.MXNetError, ValueError, TypeError) as err:
            # MXNet's message ends with the check that failed, after a C++ stack trace
            raise data_error(source, "unreadable record: %s" % str(err).strip().splitlines()[-1])
        if header.flag == 0:
            raise data_error(source, "record has a single-number label, not a detection label")
        return source, decode_label(header.label, source, len(self.class_names)), data


def read_index_keys(idx_path):
    """The keys of an ``.idx`` file (``key<TAB>offset`` per line), in file order."""
    keys = []
    with open(idx_path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            fields = line.split("\t")
            if len(fields) != 2 or not all(field.strip().isdigit() for field in fields):
                raise data_error(idx_path, "expected key<TAB>offset", line=number)
            keys.append(int(fields[0]))
    if not keys:
        raise data_error(idx_path, "empty index")
    return keys


def write_record_files(dataset, prefix, progress=None, image_root=None, skip_bad=False):
    """Write ``PREFIX.lst``, ``PREFIX.rec``, ``PREFIX.idx`` and ``PREFIX.classes.txt``.

    Images are copied byte for byte (no re-encoding) once they have decoded
    cleanly at the size their annotation states; a bad one is a :class:`DataError`,
    or with ``skip_bad`` is left out (one warning with the count). ``.lst`` paths
    are relative to ``image_root`` (default: the folder holding every image),
    which :class:`LstDataset` then needs as its ``image_root``. Files appear
    only when complete: the ``PREFIX.*.part`` files being written are removed
    when packing fails, and those of a killed run when the next one starts.
    ``progress(done, total)`` is called after each image. Returns the number of
    images and objects written.
    """
    records = dataset.records
    image_root = image_root or os.path.commonpath([os.path.dirname(os.path.abspath(r.path))
                                                   for r in records])
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    temporary = {ext: "%s.%s.part" % (prefix, ext) for ext in ("lst", "rec", "idx")}
    remove_files(temporary.values())  # a killed run's leftovers
    policy = SkipPolicy(skip_bad, dataset.source or prefix)
    try:
        written = pack(records, image_root, temporary, policy, progress)
        policy.finish(written)
        for ext, path in temporary.items():
            os.replace(path, "%s.%s" % (prefix, ext))
    finally:
        remove_files(temporary.values())  # nothing left once they have been renamed
    write_class_names(class_file(prefix), dataset.class_names)
    write_box_convention(prefix, dataset.box_convention)
    return len(written), sum(len(record.class_ids) for record in written)


def pack(records, image_root, temporary, policy, progress):
    """Write the checked images of ``records`` and their labels into the ``temporary``
    .lst/.rec/.idx files; bad images go to ``policy``. Returns the records written."""
    written = []
    writer = mx.recordio.MXIndexedRecordIO(temporary["idx"], temporary["rec"], "w")
    try:
        with open(temporary["lst"], "w", encoding="utf-8") as lst:
            for done, record in enumerate(records, 1):
                try:
                    data = checked_image_bytes(record)
                except DataError as err:
                    policy.reject(err)
                else:
                    index, label = len(written), encode_label(record)
                    lst.write(lst_line(index, label, os.path.relpath(record.path, image_root)))
                    writer.write_idx(index, mx.recordio.pack(
                        mx.recordio.IRHeader(0, label, index, 0), data))
                    written.append(record)
                if progress:
                    progress(done, len(records))
    finally:
        writer.close()
    return written


def checked_image_bytes(record):
    """The bytes of a record's image file, which must decode at the annotated size."""
    if record.orientation != 1:  # a .lst line could not say so, and its reader would not turn
        raise data_error(record.path, "annotated on the picture its EXIF orientation %d turns "
                         "(%dx%d), but a .lst/.rec pack holds the stored pixels: train on the "
                         "folder itself" % (record.orientation, record.width, record.height))
    data = read_image_bytes(record.path)
    image = decode_image(data, record.path)
    check_image_size(image.shape[1], image.shape[0], record, record.path)
    return data


def remove_files(paths):
    """Remove those of ``paths`` that exist."""
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def lst_line(index, label, path):
    """One ``.lst`` line: header and class/difficult as integers, coordinates to 1e-6."""
    if "\t" in path or "\n" in path:
        raise data_error(path, "image path contains a tab or newline, which .lst cannot hold")
    header = ["%d" % value for value in label[:HEADER_WIDTH]]
    objects = label[HEADER_WIDTH:].reshape(-1, LABEL_WIDTH)
    values = [("%d" if column in (0, 5) else "%.6f") % value
              for row in objects for column, value in enumerate(row)]
    return "%d\t%s\t%s\n" % (index, "\t".join(header + values), path)
