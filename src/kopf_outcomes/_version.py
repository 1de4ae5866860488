"""The one place of the package's version: hatch reads it for the metadata, ``__init__`` re-exports it."""
__version__ = "0.2.0"
