"""The hardware catalogue: GPUs, servers (or compute trays) and their NVLink domains.

One class per concept, in the order they build on each other:

``nvlink``
    the NVLink generations' rates and NVSwitch generations, and :class:`~.nvlink.NvlinkDomain`:
    the GPUs one NVLink fabric joins (8 on an HGX board), GB/s per GPU each way, NVSwitch generation.
``pcie``
    PCIe links as NCCL names them and what each carries (:func:`~.pcie.pcie_mbps`).
``gpus``
    :class:`~.gpus.Gpu`, a GPU model of the catalogue (an H100, a GB200) with its datasheet figures
    and its NVLink domain; ``topo train --gpu NAME`` takes one.
``servers``
    :class:`~.servers.ServerProfile`, one server type (or compute tray) as NCCL sees it: its CPUs,
    PCIe switches, GPU slots (:class:`~.servers.GpuSlot`) and fabric NICs (:class:`~.servers.Nic`),
    the model of its GPUs (``gpu_model``) and its NVLink domain (``nvlink_domain``: 8 on an HGX
    board, 72 for a tray of an NVL72 rack); and :class:`~.servers.NodeModel`, the facts of it the
    all-reduce model reads.
``profiles``
    the reader of a profile's YAML (a user's ``--server FILE``, and the shipped ones), which checks
    and bounds every value, and :func:`~.profiles.generic_profile` (a profile from counts alone).
``racks``
    :class:`~.racks.RackPlan`, the racks (NVLink domains) of a profile whose domain spans several
    trays (an NVL72 rack of 18), with the trays each keeps spare (``spare_trays``).
``shipped``
    the one loader of the data files ``topo/data/hardware/gpus.yaml`` and ``servers.yaml``
    (:func:`~.shipped.gpu_catalog`, :func:`~.shipped.server_profiles`) and
    :func:`~.shipped.find_profile` (a profile by name or path), which the spec reads a node shape
    from; they import nothing of the spec.
``catalog``
    the catalogue's public face: the loaders above, and :func:`~.catalog.resolve_server`, the
    profile of a spec. docs/nccl.md says how to add a server
    profile, docs/train.md how to add a GPU.

This is part of the design stage: modules here import each other and ``topo.errors``,
``topo.inputs`` and ``topo.spec``, never the fabric, the analyses, the outputs or the CLI. Nothing is
imported here, so that ``import topo.hardware.nvlink`` stays light; import a name from its module.
"""
