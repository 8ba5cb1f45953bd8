"""`python -m cantata`: the same as the `cantata` command."""

from .cli import main

main()
