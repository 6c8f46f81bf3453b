"""``python -m specmix.cli``: the ``specmix`` command."""

import sys

from specmix.cli.main import main

sys.exit(main())
