"""The ``specmix`` command line (:mod:`~specmix.cli.main`)."""
