"""``zoo check``: validate model configs against their backbone graphs and print a table."""
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(p):
    p.add_argument("configs", nargs="*", metavar="CONFIG.yaml",
                   help="YAML files to check (default: every registered model)")


def run(args):
    # Imported here: checking builds the models, which loads MXNet; the parser does without.
    from zoo.jobs.check import check_files, format_table, registered_config_files
    paths = args.configs or registered_config_files()
    rows, failures = check_files(paths)
    if rows:
        print(format_table(rows))
    for failure in failures:
        print(failure, file=sys.stderr)
    print("%d configs checked, %d failed" % (len(paths), len(failures)))
    return 1 if failures else 0
