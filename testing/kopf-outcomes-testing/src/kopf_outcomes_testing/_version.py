"""The one place of this distribution's version (hatch reads it; released with kopf-outcomes)."""
__version__ = "0.2.0"
