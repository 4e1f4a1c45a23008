"""`python -m kompl` runs the command-line interface."""

from kompl.cli.main import run

run()
