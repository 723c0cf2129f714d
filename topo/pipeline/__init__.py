"""The pipeline: each command's run of the stages, as a library call.

A verb loads its inputs, runs the design stage, the analyses and the renderers in order, and
returns what it made (or writes it into an atomic folder); it never prints. What it says while it
runs goes to a :class:`~topo.pipeline.progress.Progress` (the command line's writes on stderr;
the default says nothing), and a mistake in the input is a :class:`~topo.errors.TopoError`.

``progress``
    the Progress protocol and SILENT, the default.
``design``
    loading a design: a spec file and fields, or a DESIGN folder (its ``spec.yaml``, checked
    against its ``design.json``); the files a build reads.
``build``
    ``topo build``: spec -> fabric -> analysis -> facts -> files -> folder; the file set of a
    build folder (:func:`~topo.pipeline.build.build_files`).
``analyze``
    ``topo analyze``: a design loaded, built and analysed.
``train``
    ``topo train``: a workload's step on a fabric, its scaling curve and the fabric what-ifs.
``sweep``, ``sweep_run``
    ``topo sweep``: the sweep file, grid and tasks; running the designs (cache, local processes,
    Dask) into rows.
``report``
    ``topo report``: the design review of one or several designs, with a sweep's and a training
    run's results read back.
``check``
    ``topo check``: a build folder checked whole against the files its spec renders.
``apart``
    long analyses (the design review's what-ifs) in a forked child, so that Ctrl-C stops them.

Modules here may import every earlier stage (``topo/*.py``, ``topo.analysis``, ``topo.outputs``)
and each other (without a cycle), never the CLI nor click. Nothing earlier imports them.
"""
