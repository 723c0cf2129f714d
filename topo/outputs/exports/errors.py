"""What the export formats share: the error an export that cannot be written as asked raises."""

from __future__ import annotations

from ...errors import TopoError


class ExportError(TopoError):
    """An export that cannot be written as asked (an unknown containerlab kind, a bad attribute)."""
