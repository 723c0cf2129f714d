"""The outputs: from a Fabric and its analyses to the files of a build folder.

Every renderer returns ``{relative path: text}`` (or yields ``(path, text)``); only the CLI writes.
The facts the files print are computed before them, in the design stage (the summary counts
:mod:`topo.summary`, the cabling plan :mod:`topo.cabling`, the QoS profiles and PFC headroom
:mod:`topo.qos`, the buffer layouts :mod:`topo.buffers`, the media catalogue :mod:`topo.media`, and
on the Fabric itself each tier's switch model, the link technology and the port names) and in the
analyses; the modules here lay them out.

``templating``, ``template_memo``
    the Jinja2 environment: the template search path (user folders, then the packaged
    templates), strict undefined variables, errors that name the template and line; and the
    includes rendered once per distinct input.
``summary``, ``design``, ``caveats``
    the summary's lines (console, README, review); the design files (``spec.yaml``,
    ``design.json``, ``summary.json``, ``analysis.json``); the warnings of a build, collected.
``configs/``
    switch and host configs: the switch operating systems as a table (``systems``: SONiC with FRR
    today, a new OS is a row plus ``templates/<os>/``), the facts per tier (``qos_facts``) and per
    switch (``facts``), the servers' files (``hosts``) and the rendering job (``job``).
``placement``, ``nccl_xml``, ``nccl``, ``imex``, ``labels``
    hostfiles, rankfile and Slurm topology; NCCL topology XML (a reader that parses it as NCCL
    does, and the writer) and the NCCL environment; the IMEX daemon's node list of each NVLink
    domain, and the Kubernetes node labels, of a rack-scale design.
``cabling``
    ``cabling.csv`` and ``bom.csv``, written from the cabling plan, and its one-line account.
``exports/``, ``diagram``
    one module per format: GraphML (``graphml``), Graphviz DOT (``dot``), the containerlab lab
    (``containerlab``); the fabric as an SVG picture.
``report``, ``plots``
    the design review (HTML and Markdown) and its SVG plots.
``readme``, ``manifest``, ``writer``
    the build folder's README.md and the list of every templated output; the build stamp
    (``topo-build.json``); the atomic folder writer.
``terminal``, ``sweep_table``, ``sweep_files``
    the tables ``topo`` prints on stdout; a sweep's columns and Pareto fronts, and its files.

Modules here import the design stage, the analyses' results (``analysis.analyze``; never the
models' internals: routing, congestion, the NCCL tuner, ECMP, up-down routing) and earlier outputs; never the pipeline (``topo.pipeline``,
which runs them: ``pipeline/build.py`` makes a build folder's file set) or the CLI. A renderer
reads the facts it prints and never works them out again.
"""
