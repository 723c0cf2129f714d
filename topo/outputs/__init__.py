"""The outputs: from a Fabric and its analyses to the files of a build folder.

Every renderer returns ``{relative path: text}`` (or yields ``(path, text)``); only the CLI writes.

``templating``
    the Jinja2 environment: the template search path (user folders, then the packaged
    templates), strict undefined variables, and errors that name the template and line.
``summary``, ``design``
    the counts per tier, and the design files (``spec.yaml``, ``design.json``, ``summary.json``,
    ``analysis.json``).
``qos``, ``configs``
    lossless RoCE QoS and PFC headroom; SONiC ``config_db.json`` and FRR ``frr.conf`` of every
    switch, and the servers' QoS script and addresses.
``placement``, ``nccl_xml``, ``nccl``
    hostfiles, rankfile and Slurm topology; NCCL topology XML (a reader that parses it as NCCL
    does, and the writer) and the NCCL environment.
``media``, ``cabling``
    the media catalogue (cables and optics by speed and reach); the cabling plan and the bill of
    materials.
``exports``
    GraphML, Graphviz DOT and the containerlab lab.
``readme``, ``writer``
    the build folder's README.md and the list of every templated output, and the atomic folder
    writer.
``terminal``, ``sweep_table``, ``sweep_files``
    the tables ``topo`` prints on stdout; a sweep's columns and Pareto fronts, and its files.

Modules here import the design stage, the analyses and earlier outputs, never the pipeline
(``topo.pipeline``, which runs them: ``pipeline/build.py`` makes a build folder's file set) or
the CLI.
"""
