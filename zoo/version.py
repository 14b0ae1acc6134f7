"""The installed package's version, recorded in every artifact."""
from importlib import metadata

try:
    __version__ = metadata.version("mxnet-detection-zoo")
except metadata.PackageNotFoundError:  # a source tree used without installing it
    __version__ = "unknown"
