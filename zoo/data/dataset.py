"""The dataset interface shared by every reader."""
from .images import read_image
from .records import data_error


class DetectionDataset:
    """Images on disk with their ground truth.

    ``records`` holds every image's annotations (so evaluation needs no
    decoding); ``dataset[i]`` decodes image ``i`` and returns ``(image,
    label)``: an HxWx3 uint8 RGB array and an (M, 6) float32 label
    ``[class_id, x1, y1, x2, y2, difficult]`` in pixels.
    """

    def __init__(self, records, class_names):
        self.records = records
        self.class_names = list(class_names)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, index):
        record = self.records[index]
        image = read_image(record.path)
        check_image_size(image.shape[1], image.shape[0], record, record.path)
        return image, record.label()

    def image_path(self, index):
        """The image file of item ``index``."""
        return self.records[index].path

    @property
    def image_ids(self):
        """The format's own image ids (VOC ids, COCO image ids, .lst indices), in order."""
        return [record.key for record in self.records]

    def __repr__(self):
        return "%s(%d images, %d classes)" % (type(self).__name__, len(self),
                                             len(self.class_names))


def check_image_size(width, height, record, source):
    """Raise :class:`DataError` if an image is not the size its annotation states,
    since the boxes were drawn on an image of that size."""
    if (width, height) != (record.width, record.height):
        raise data_error(source, "image is %dx%d but its annotation says %dx%d"
                         % (width, height, record.width, record.height))


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
