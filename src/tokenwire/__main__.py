"""``python -m tokenwire`` is the ``tokenwire`` command."""

from .cli import main

main()
