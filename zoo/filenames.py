"""File names made from data: a class name, an image's or a video's name that becomes a file
or folder name is made one safe path component here, so that no name a model file or a
dataset carries (``../../x``, ``/etc``, ``..``, a newline) can choose where a file goes.

A model file is data: its class names come from whoever made it, and a downloaded ``.onnx``
or artifact must not write outside the folder the user named.
"""
import hashlib
import unicodedata

__all__ = ["MAX_COMPONENT_BYTES", "safe_component", "unique_components"]

MAX_COMPONENT_BYTES = 120
"""The longest component made, in UTF-8 bytes: file systems allow 255, and a suffix
(``_frame000012-2_17.jpg``) is added to many."""
REPLACEMENT = "_"
UNSAFE = frozenset('/\\<>:"|?*')
"""Characters replaced anywhere: path separators (both systems') and those Windows
refuses."""


def safe_component(name):
    """``name`` as one path component that stays in its folder: path separators, control
    characters and ``<>:"|?*`` become ``_``, as does a leading dot (no ``.``, ``..`` or
    hidden name); empty becomes ``_``. A name longer than :data:`MAX_COMPONENT_BYTES` is
    cut and ends in 8 hex digits of its sha256, so that long names stay apart. A name
    that is already safe comes back unchanged."""
    name = str(name)
    text = "".join(REPLACEMENT if char in UNSAFE or unicodedata.category(char)[0] == "C"
                   else char for char in name)
    if text.startswith("."):
        text = REPLACEMENT + text[1:]
    text = text or REPLACEMENT
    if len(text.encode("utf-8")) > MAX_COMPONENT_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        head = text.encode("utf-8")[:MAX_COMPONENT_BYTES - 9].decode("utf-8", "ignore")
        text = "%s~%s" % (head, digest)
    return text


def unique_components(names, taken=()):
    """:func:`safe_component` of each of ``names``, in order, made unique (also where a
    file system ignores case) by ``-2``, ``-3``... after the second and later of a kind:
    ``a/b`` and ``a_b`` do not share a folder. None is one of ``taken`` (components in use
    already)."""
    made, used = [], {component.casefold() for component in taken}
    for name in names:
        stem = safe_component(name)
        component, count = stem, 1
        while component.casefold() in used:
            count += 1
            component = "%s-%d" % (stem, count)
        used.add(component.casefold())
        made.append(component)
    return made
