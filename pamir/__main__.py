"""`python -m pamir ARGS` runs the `pamir` command (pamir.cli), e.g. from a checkout that is not
the installed one: `PYTHONPATH=. python -m pamir search ...`."""

from .cli import main

main()
