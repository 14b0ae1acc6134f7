"""Turn the array types the metrics accept into numpy arrays."""
import numpy as np


def to_numpy(array):
    """``array`` as a numpy array; MXNet NDArrays are copied out with ``asnumpy()``.

    ``np.asarray`` cannot be used on an NDArray directly: it builds a nested
    object array instead of reading the values.
    """
    if hasattr(array, "asnumpy"):
        return array.asnumpy()
    return np.asarray(array)
