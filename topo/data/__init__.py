"""Data shipped with topo (the switch catalogue)."""
