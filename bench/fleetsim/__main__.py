"""``python -m bench.fleetsim``: see :mod:`bench.fleetsim.main`."""

import sys

from bench.fleetsim.main import main

sys.exit(main())
