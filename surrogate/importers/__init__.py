"""Importers: public and lab recordings -> the capture format.

Each importer checks every input file, skips and reports bad ones (file, episode,
field, reason) and keeps the rest, and writes its output atomically.
"""

from .report import ImportReport

__all__ = ["ImportReport"]
