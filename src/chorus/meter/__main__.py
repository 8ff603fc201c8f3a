"""``python -m chorus.meter <run dir> <fd> [<orphan s>]``: the meter's own process."""

import sys

from chorus.meter._process import main

sys.exit(main(sys.argv[1:]))
