"""What ``zoo plot-log`` plots, as options: :class:`PlotLogOptions` (the plotting itself is
:func:`zoo.inference.visualize.plot_training_log`)."""
from dataclasses import dataclass
from typing import Optional

from zoo.flags import flag, options_from

__all__ = ["PlotLogOptions"]


@dataclass(frozen=True)
class PlotLogOptions:
    """``csv`` is the command's positional word; ``output`` declares its flag
    (:mod:`zoo.flags`)."""
    csv: str                             # per-epoch training log
    output: Optional[str] = flag(None, "PNG to write (default: the CSV's path with .png)")

    @classmethod
    def from_flags(cls, args, **values):
        """The options of ``zoo plot-log``'s parsed flags, those of ``values`` given."""
        return options_from(cls, args, **values)
