"""`python -m cantata.cli` runs the `cantata` command."""

from .app import main

main()
