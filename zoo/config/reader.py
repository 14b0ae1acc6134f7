"""A bounded YAML reader for configs: ``yaml.safe_load`` without its two silent cases.

- A key set twice in one mapping is an error naming the key and both lines (PyYAML keeps
  the last one without a word). A merge (``<<: *anchor``) still overrides what it merges:
  only a mapping's own keys count.
- Aliases are allowed (the registry's configs share shape sections with ``&``/``*``), but
  the document's size with every alias expanded is bounded: a 400-byte "billion laughs"
  file would expand to gigabytes wherever it is walked, printed or copied.
"""
import yaml

__all__ = ["YamlLimitError", "DuplicateKeyError", "load", "MAX_EXPANDED_NODES"]

MAX_EXPANDED_NODES = 100_000
"""The most nodes a config may hold with its aliases expanded (a real one holds hundreds)."""


class YamlLimitError(yaml.YAMLError):
    """The document is larger than :data:`MAX_EXPANDED_NODES` once its aliases are expanded
    (or an alias refers to itself). ``problem`` and ``problem_mark`` as PyYAML's errors."""

    def __init__(self, mark, what):
        self.problem = what
        self.problem_mark = mark
        super().__init__(what)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping sets one key twice; ``problem_mark`` is the second one's."""

    def __init__(self, key, first_mark, second_mark):
        self.key = key
        self.lines = (first_mark.line + 1, second_mark.line + 1)
        self.problem = "key %s is set twice, on lines %d and %d (the last would win)" % (
            _quoted(key), *self.lines)
        self.problem_mark = second_mark
        super().__init__(self.problem)


def _quoted(key, limit=40):
    """``repr(key)`` shortened: a key may be a long scalar."""
    text = repr(key)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _Loader(yaml.SafeLoader):
    """SafeLoader refusing duplicate keys and documents that expand past the bound."""

    def construct_document(self, node):
        _check_size(node)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            _check_duplicates(self, node)
        return super().construct_mapping(node, deep=deep)


def _check_duplicates(loader, node):
    """Raise :class:`DuplicateKeyError` for the first key ``node`` itself sets twice."""
    seen = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise DuplicateKeyError(key, seen[key], key_node.start_mark)
        seen[key] = key_node.start_mark


def _check_size(root):
    """Raise :class:`YamlLimitError` if ``root`` expands past the bound. Each node's expanded
    size is computed once (memoised by identity), so the check costs the document's
    length, not its expansion; a composed graph has no cycles for plain YAML."""
    sizes, open_nodes = {}, set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        pending = [child for child in _children(node) if id(child) not in sizes]
        if not children_done and pending:
            if any(id(child) in open_nodes for child in pending):
                raise YamlLimitError(node.start_mark, "an alias refers to the node that holds it "
                                     "(an endless expansion)")
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in pending)
            continue
        open_nodes.discard(id(node))
        sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _children(node))
        if sizes[id(node)] > MAX_EXPANDED_NODES:
            raise YamlLimitError(node.start_mark, "aliases expand the document past %d nodes "
                                 "(a config holds hundreds)" % MAX_EXPANDED_NODES)


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load(stream):
    """The document of ``stream`` as ``yaml.safe_load`` reads it, refusing duplicate keys
    (:class:`DuplicateKeyError`) and alias bombs (:class:`YamlLimitError`), both
    ``yaml.YAMLError``."""
    loader = _Loader(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
