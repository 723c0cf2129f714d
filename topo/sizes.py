"""Message sizes as people write them: ``8G`` and ``8GiB`` (binary), ``8GB`` (decimal), ``8Gb`` (bits).

The ``--sizes`` of ``topo analyze`` and ``topo sweep`` (and a sweep file's ``sizes``) are read
here: :func:`parse_size` gives the bytes, :func:`size_note` the line that says how a size in a
decimal unit or in bits was read. Standard library only.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .errors import quote

#: Message size prefixes: binary (nccl-tests counts 8G as 8 GiB), and decimal when a unit follows
#: (8GB, 8Gb); the prefix's case does not matter. The unit's does: B is bytes, b is bits.
_PREFIXES = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}
#: Largest message size and most sizes one analysis takes.
MAX_SIZE = 1 << 40
MAX_SIZES = 64
_SIZE = re.compile(r"([0-9]{1,13}(?:\.[0-9]{1,6})?)\s*(?:([KMGTkmgt])(i|I)?)?([Bb]?)")


def size_unit(text: str) -> tuple[int, str]:
    """``(bytes, how it was read)`` of a message size; ValueError for anything else.

    The prefix K, M, G, T (either case) is binary alone or with ``i`` (``8G``, ``8GiB``: 8 GiB, as
    nccl-tests counts) and decimal before a unit (``8GB``: 8,000,000,000 bytes). The unit's case
    matters: ``B`` is bytes and ``b`` bits, as on a data sheet (``8Gb`` is 8 gigabits, 1,000,000,000
    bytes; ``8Gib`` 8 gibibits, 1 GiB). A size must come to a whole number of bytes.

    >>> size_unit("8G")[0], size_unit("8GiB")[0], size_unit("8GB")[0], size_unit("8Gb")[0], size_unit("8Gib")[0]
    (8589934592, 8589934592, 8000000000, 1000000000, 1073741824)
    """
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(text)
    number, prefix, binary, unit = match.groups()
    prefix = (prefix or "").upper()
    power = _PREFIXES[prefix]
    decimal = bool(prefix) and not binary and bool(unit)
    scale = 1000 ** power if decimal else 1 << (10 * power)
    bits = unit == "b"
    value = Fraction(number) * scale / (8 if bits else 1)
    if value.denominator != 1 or not 1 <= value <= MAX_SIZE:
        raise ValueError(text)
    kind = ("bits" if bits else "bytes") if unit else "bytes"
    how = (f"{'decimal' if decimal else 'binary'} {kind}" if prefix else kind)
    return int(value), how


def parse_size(text: str) -> int:
    """``"1M"``, ``"1MiB"``, ``"8G"`` or ``"4096"`` -> bytes (binary units); ``"8GB"`` is decimal
    and ``"8Gb"`` decimal bits (:func:`size_unit`).

    >>> parse_size("8GiB"), parse_size("1m"), parse_size("4096"), parse_size("1GB"), parse_size("8Gb")
    (8589934592, 1048576, 4096, 1000000000, 1000000000)
    """
    return size_unit(text)[0]


def size_note(text: str) -> str | None:
    """A line saying how a size in decimal units or in bits was read (``8GB`` is 8,000,000,000
    bytes, not 8 GiB; ``8Gb`` is 8 gigabits, 1,000,000,000 bytes)."""
    size, how = size_unit(text)
    text = text.strip()
    match = _SIZE.fullmatch(text)
    number, prefix = match.group(1), (match.group(2) or "").upper()
    if how == "decimal bytes":
        binary = int(Fraction(number) * (1 << 10 * _PREFIXES[prefix]))  # not bounded: only said
        return (f"--sizes {text}: {size:,} bytes ({prefix}B is decimal; {number}{prefix} or {number}{prefix}iB "
                f"is {binary:,})")
    if how.endswith("bits"):
        binary = how.startswith("binary")
        names = _BINARY_NAMES if binary else _DECIMAL_NAMES
        as_bytes = f"{number}{prefix}{'i' if binary else ''}B"
        return (f"--sizes {text}: {size:,} bytes (b is bits: {number} {names[prefix]}bits; {as_bytes} is "
                f"{size * 8:,} bytes)")
    return None


_DECIMAL_NAMES = {"": "", "K": "kilo", "M": "mega", "G": "giga", "T": "tera"}
_BINARY_NAMES = {"": "", "K": "kibi", "M": "mebi", "G": "gibi", "T": "tebi"}


class Sizes(tuple):
    """Message sizes in bytes, with a line for each size given in a decimal unit."""

    notes: tuple[str, ...] = ()


def parse_sizes(text: str) -> Sizes:
    """Comma-separated message sizes (at most MAX_SIZES), with a note for each one given in a
    decimal unit or in bits; ValueError with the line to show for a list that is not one.

    >>> parse_sizes("1M,8GB"), parse_sizes("1M,8GB").notes[0][:20]
    ((1048576, 8000000000), '--sizes 8GB: 8,000,0')
    """
    parts = [part for part in text.split(",") if part.strip()]
    if len(parts) > MAX_SIZES:
        raise ValueError(f"{len(parts)} sizes; at most {MAX_SIZES}")
    try:
        sizes = Sizes(parse_size(part) for part in parts)
    except ValueError as exc:
        raise ValueError(f"{quote(exc.args[0])} is not a size from 1 byte to 1 TiB, such as 1M, 256MiB, 8G, 8GB "
                         f"or 4096") from None
    sizes.notes = tuple(note for note in map(size_note, parts) if note)
    return sizes
