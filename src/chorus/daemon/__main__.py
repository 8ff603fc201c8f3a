"""``python -m chorus.daemon``: run the daemon in the foreground."""

from chorus.daemon._server import main

main()
