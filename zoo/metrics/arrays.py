"""Turn the array types the metrics accept into numpy arrays; checks shared by the metrics."""
import numpy as np

__all__ = ["as_text", "check_pixel_offset", "to_numpy"]


def to_numpy(array):
    """``array`` as a numpy array; MXNet NDArrays are copied out with ``asnumpy()``.

    ``np.asarray`` cannot be used on an NDArray directly: it builds a nested
    object array instead of reading the values.
    """
    if hasattr(array, "asnumpy"):
        return array.asnumpy()
    return np.asarray(array)


def as_text(values):
    """A number or a row of numbers as short text for error messages: ``[60, 10, nan, 4]``."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0:
        return "%g" % values
    return "[%s]" % ", ".join("%g" % value for value in values.ravel())


def check_pixel_offset(pixel_offset):
    """ValueError unless ``pixel_offset`` is 1 (inclusive corners) or 0 (continuous ones)."""
    if pixel_offset not in (0, 1):
        raise ValueError("pixel_offset=%r: expected 1 (inclusive corners) or 0 (continuous "
                         "or normalised corners)" % (pixel_offset,))
