"""``python -m mutation``: see :mod:`mutation.run`."""

from __future__ import annotations

import sys

from mutation.run import main

sys.exit(main())
