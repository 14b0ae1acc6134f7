"""The zoo's side of one seed of ``zoo benchmark-parity`` in a process of its own:
``python -m zoo_bench.parity_zoo REQUEST.json``, so that it can train beside GluonCV's side
(:mod:`zoo_bench.parity_gluoncv`) with its own share of the cores (``--run-sides
together``): MXNet reads its thread count once, when it loads.

The request (:func:`zoo_bench.parity.zoo_request` writes it) holds the benchmark's options,
the seed, the data root, the imported start and the seed's folder; the child runs
:func:`zoo_bench.parity.train_zoo` (``zoo train --init-from`` the start, every epoch scored)
and writes the :class:`~zoo_bench.parity.SideRun` as one JSON line on its standard output.
"""
import json
import sys
from dataclasses import asdict

__all__ = ["main"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        request = json.load(f)
    # Only the answer goes to standard output: the training's lines go to stderr.
    answer, sys.stdout = sys.stdout, sys.stderr
    from zoo_bench.options import ParityBenchmarkOptions
    from zoo_bench.parity import train_zoo
    options = ParityBenchmarkOptions(**request["options"])
    run = train_zoo(options, request["seed"], request["root"], request["init_prefix"],
                    request["folder"])
    print(json.dumps(asdict(run)), file=answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
