"""kompl: a command-line knowledge compiler (documents in, a reviewed, cited wiki out)."""

__version__ = "0.1.0"
