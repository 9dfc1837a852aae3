"""A CSV of numbers, read as a stream: memory is bounded by the numbers, never by the text.

The poses importer reads tracker exports with it. A line longer than ``MAX_LINE`` characters (a huge field, a
binary or sparse file) is refused after reading that much, a field over ``csv``'s size limit is refused naming
its row, text that is not UTF-8 names the first bad byte's offset: each as a ``CaptureError`` the importer turns
into a skipped input.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np

from ..errors import CaptureError

MAX_LINE = 1 << 20  # characters: a row of numbers is never this long; a longer "row" (a huge field, a sparse
                   # file of NUL bytes) is refused after reading this much, so memory stays bounded


def _lines(f, path: Path):
    """The file's lines, each read with at most ``MAX_LINE`` characters (never a whole huge line in memory)."""
    n = 0
    while True:
        line = f.readline(MAX_LINE)
        if not line:
            return
        n += 1
        if len(line) >= MAX_LINE and not line.endswith("\n"):
            raise CaptureError(f"line {n} is longer than {MAX_LINE} characters: not a table of numbers "
                               f"(a huge field, or a binary or sparse file)", file=path, field="rows")
        yield line


def _first_bad_byte(path: Path) -> tuple[int, int]:
    """(offset, value) of the first byte that is not UTF-8, decoding in chunks (bounded memory)."""
    import codecs

    dec, offset = codecs.getincrementaldecoder("utf-8")(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            held = dec.getstate()[0]  # the bytes of a character split over the last chunk's end
            try:
                dec.decode(chunk)
            except UnicodeDecodeError as e:
                return offset - len(held) + e.start, (held + chunk)[e.start]
            offset += len(chunk)
    return offset, 0


def _csv_rows(path: Path):
    """The CSV's rows (lists of strings), streamed: UTF-8 with or without a byte-order mark, comment rows
    (``#``) and empty rows left out; CaptureError naming the file, row and reason for what cannot be read."""
    try:
        f = open(path, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise CaptureError(f"unreadable ({e.strerror or type(e).__name__})", file=path, field="file") from None
    with f:
        reader = csv.reader(_lines(f, path))
        try:
            for r in reader:
                if r and not r[0].lstrip().startswith("#"):
                    yield r
        except UnicodeDecodeError:
            at, byte = _first_bad_byte(path)
            raise CaptureError(f"not UTF-8 text (byte 0x{byte:02x} at offset {at}); save it as UTF-8",
                               file=path, field="encoding") from None
        except csv.Error as e:  # e.g. a field over csv's size limit
            raise CaptureError(f"row {reader.line_num}: not a CSV row of numbers ({e})", file=path,
                               field="rows") from None
        except OSError as e:
            raise CaptureError(f"unreadable ({e.strerror or type(e).__name__})", file=path, field="file") from None


def read_csv(path: Path) -> tuple[list[str] | None, np.ndarray]:
    """(header names or None, [rows, columns] float64) of a CSV of numbers; CaptureError naming the file, row and
    field of what cannot be read."""
    rows = _csv_rows(path)
    first = next(rows, None)
    if first is None:
        raise CaptureError("empty file", file=path)
    header = None
    try:
        [float(x) for x in first]
    except ValueError:
        header, first = [h.strip() for h in first], None
    width = len(header) if header else len(first)
    data = []  # one float row each: memory is the numbers', not the text's
    for i, r in enumerate(rows if first is None else itertools.chain([first], rows)):
        if len(r) != width:
            raise CaptureError(f"row {i + 1} has {len(r)} values, expected {width} (truncated file?)", file=path, field="rows")
        row = np.empty(width)
        for j, x in enumerate(r):
            try:
                row[j] = float(x)
            except ValueError:
                raise CaptureError(f"row {i + 1}: {x[:40]!r} is not a number", file=path,
                                   field=header[j] if header else f"column {j}") from None
        data.append(row)
    if not data:
        raise CaptureError("has a header but no data rows", file=path, field="rows")
    return header, np.stack(data)
