"""``python -m chorus.daemon``: run the daemon in the foreground.

The cyclic garbage collector is off while the daemon's code loads: the imports make
hundreds of thousands of objects that live as long as the process, and each of the
collector's full passes over them (several while the heap grows) cost the start
about a tenth of its CPU. Once loaded they are frozen (left out of every later
collection, as they would survive each) and the collector runs as before. The
methods its data classes are given come compiled from the last start
(``chorus._classcode``).
"""

import gc

gc.disable()

from chorus._classcode import install, save  # noqa: E402 (after the collector is off)

install()

from chorus.daemon._server import main  # noqa: E402 (its classes' methods as kept)

save()
gc.freeze()
gc.enable()
main()
