"""Options that are also command-line flags, each declared once: on the field of the options
dataclass that holds it (:func:`flag`: its default, help text, flag name, type, choices), from
which a command's parser takes the flag (:func:`add_flags`) and its run builds the options
back (:func:`options_from`, through the options class's own ``from_flags``: a call that names
the class it builds lets a reader, and ``farm-studio walk``, follow a flag from the parsed
arguments to the options and on to where the job reads it). Here too the argparse types that check a flag's
value while the command line is parsed (a bad value is a usage error naming its flag, before
any model or dataset is opened).

Nothing here loads MXNet: the parsers (``--help``) build from these alone."""
import argparse
import dataclasses
import math

from zoo.process import gpu_ids

__all__ = ["FLAG", "add_flag", "add_flags", "comma_list", "ctx", "flag", "flag_name",
           "float_in", "fraction", "increasing", "network", "nonnegative_float",
           "nonnegative_int", "options_from", "positive_float", "positive_int"]

FLAG = "flag"
"""The key of a field's metadata that holds its flag (:func:`flag`)."""


def flag(default, help, name=None, **argparse_keywords):
    """A dataclass field of ``default`` that is also the flag ``name`` (default
    :func:`flag_name`), shown with ``help``; ``argparse_keywords`` (``type``, ``choices``,
    ``metavar``, ``nargs``, ``const``) go to ``add_argument`` as written. A bool field is an
    on/off switch: ``--NAME`` turns on a field that defaults to False, ``--no-NAME`` turns
    off one that defaults to True."""
    return dataclasses.field(default=default, metadata={
        FLAG: dict(argparse_keywords, help=help, name=name)})


def flag_name(field):
    """``--data-shape`` for field ``data_shape``; ``--no-crop`` for a bool ``crop`` that
    defaults to True."""
    name = "--" + field.name.replace("_", "-")
    return "--no-" + name[2:] if field.default is True else name


def add_flags(parser, options_class, *names, defaults=None):
    """Add the flags that fields ``names`` of ``options_class`` declare (:func:`flag`) to
    ``parser``, in that order (the order ``--help`` lists them in); their defaults are the
    class's (those of ``defaults``, another options class with these fields, if given)."""
    fields = {field.name: field for field in dataclasses.fields(options_class)}
    for name in names:
        add_flag(parser, fields[name], getattr(defaults or options_class, name))


def options_from(options_class, args, **values):
    """``options_class`` (an options dataclass) from the parsed flags ``args``: every field
    from the flag of the same name (its ``dest``), except those given in ``values``."""
    return options_class(**values, **{field.name: getattr(args, field.name)
                                      for field in dataclasses.fields(options_class)
                                      if field.name not in values})


def add_flag(parser, field, default):
    """Add the flag ``field`` declares (:func:`flag`) to ``parser``, its default ``default``
    (the field's, read from its class when the parser is built)."""
    keywords = dict(field.metadata[FLAG])
    name = keywords.pop("name") or flag_name(field)
    if isinstance(field.default, bool):
        # A switch turns its field's own default the other way.
        keywords["action"] = "store_false" if field.default else "store_true"
        default = field.default
    parser.add_argument(name, dest=field.name, default=default, **keywords)


def _number(parse, value, kind):
    try:
        return parse(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be %s, got %r" % (kind, value)) from None


def positive_int(value):
    """A count: an integer >= 1."""
    number = _number(int, value, "an integer >= 1")
    if number < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1, got %r" % value)
    return number


def nonnegative_int(value):
    number = _number(int, value, "an integer >= 0")
    if number < 0:
        raise argparse.ArgumentTypeError("must be an integer >= 0, got %r" % value)
    return number


def float_in(low=-math.inf, high=math.inf, low_open=False, high_open=False):
    """A type accepting finite floats from ``low`` to ``high`` (each end included unless
    ``low_open``/``high_open``)."""
    bounds = [("%s %g" % (">" if low_open else ">=", low)) if low > -math.inf else "",
              ("%s %g" % ("<" if high_open else "<=", high)) if high < math.inf else ""]
    kind = " ".join(["a finite number"] + [b for b in bounds if b])
    if all(bounds):
        kind = "a finite number %s and %s" % tuple(bounds)

    def parse(value):
        number = _number(float, value, kind)
        if (not math.isfinite(number) or number < low or number > high
                or (low_open and number == low) or (high_open and number == high)):
            raise argparse.ArgumentTypeError("must be %s, got %r" % (kind, value))
        return number
    parse.__name__ = kind
    return parse


positive_float = float_in(0.0, low_open=True)
nonnegative_float = float_in(0.0)
fraction = float_in(0.0, 1.0)


def comma_list(item_type):
    """A type parsing ``"a,b,c"`` into a tuple of ``item_type`` values; ``""`` is ``()``."""
    def parse(value):
        return tuple(item_type(item.strip()) for item in value.split(",") if item.strip())
    parse.__name__ = "comma-separated list"
    return parse


def increasing(list_type):
    """A type parsing a list with ``list_type`` whose entries must strictly increase."""
    def parse(value):
        items = list_type(value)
        if any(b <= a for a, b in zip(items, items[1:])):
            raise argparse.ArgumentTypeError("must strictly increase, got %r" % value)
        return items
    parse.__name__ = getattr(list_type, "__name__", "list")
    return parse


def ctx(value):
    """``cpu`` or ``gpuN[,M...]`` naming GPUs this MXNet sees."""
    try:
        ids = gpu_ids(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not ids:
        return value
    import mxnet as mx  # only to count the GPUs named: cpu (and --help) goes without
    available = mx.context.num_gpus()
    missing = [i for i in ids if i >= available]
    if missing:
        seen = ("sees no GPU (a CPU-only build, or no driver)" if not available else
                "sees %d GPU%s (gpu0 to gpu%d)" % (available, "s" if available > 1 else "",
                                                    available - 1))
        raise argparse.ArgumentTypeError("must name GPUs this machine has, got %r: MXNet %s"
                                         % (value, seen))
    return value


def network(value):
    """A registered model name or the path of a YAML config."""
    from zoo.config.registry import is_network, list_models  # read when a flag names one
    if is_network(value):
        return value
    raise argparse.ArgumentTypeError("must be a registered model (%s) or a YAML file, got %r"
                                     % (", ".join(list_models()), value))
