"""``python -m refdocs [--check]``: see refdocs.generate."""

import sys

from refdocs.generate import main

sys.exit(main())
