"""The ``zoo benchmark*`` commands: each a module with ``add_arguments(parser)`` and
``run(args) -> int``, as the modules of :mod:`zoo.cli`, which lists them in its command table
and loads them by name (see :func:`zoo.cli.command_module`)."""
