"""``python -m chorus.meter <run dir> <fd> [<orphan s>]``: the meter's own process
(its data classes' methods compiled as kept by ``chorus._classcode``)."""

import sys

from chorus._classcode import install, save

install()

from chorus.meter._process import main  # noqa: E402 (its classes' methods as kept)

save()
sys.exit(main(sys.argv[1:]))
