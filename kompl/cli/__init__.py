"""The command-line shell: the only package that imports typer or rich."""
