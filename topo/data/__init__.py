"""Data shipped with topo: the switch, optics and model catalogues (``*.yaml``), and the hardware
catalogue's family of files under ``hardware/`` (GPUs and server profiles, read by
:mod:`topo.hardware.catalog`)."""
