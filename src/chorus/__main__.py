"""``python -m chorus`` runs the CLI."""

from chorus.cli import main

main()
