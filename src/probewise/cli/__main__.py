"""``python -m probewise.cli``: the same as the ``probewise`` command."""

import sys

from probewise.cli import main

sys.exit(main())
