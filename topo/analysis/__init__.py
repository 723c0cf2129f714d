"""The analyses: pure functions of a built Fabric that return frozen results with ``to_dict()``.

In the order they build on each other:

``choices``, ``options``
    the analysis options: their plain choices and defaults (``choices`` imports nothing, for the
    command line), and :class:`~topo.analysis.options.AnalysisOptions` with its checks.
``faults``
    links and switches taken out of a fabric (named, or a seeded random fraction).
``updown``
    valley-free (up-down) reachability between leaves, as an RFC 7938 underlay routes.
``hops``, ``ecmp``, ``bisection``
    hop counts between GPUs, ECMP width between leaves and pods, bisection bandwidth (analytic and
    scipy max-flow).
``tuner``, ``collective``, ``routing``, ``congestion``
    NCCL's tuner; a communicator's channels, rings and trees and their connections; their paths
    (ECMP hashing, adaptive routing or D-mod-K); their rates under the lossless congestion model
    (max-min fair under ECN, or PFC pauses).
``allreduce``
    the all-reduce model: concurrent groups' all-reduce routed, rated over the hash samples and
    timed by the tuner, never above the intact fabric's on the same draws.
``groups``
    where concurrent groups of GPU ranks sit: their servers (or NVLink domains) and NICs.
``pricing``
    **the one door for collectives**: :func:`topo.analysis.pricing.price` prices an all-reduce,
    all-gather, reduce-scatter, all-to-all or send/receive of some message sizes, for a set of
    groups that run it at once (or the job of the options), on a
    :class:`~topo.analysis.pricing.Network` (a fabric under the options and failures). Nothing
    else prices a collective: only ``allreduce`` and ``pricing`` route and rate flows for it.
``analyze``
    :func:`topo.analysis.analyze.analyze` runs them all (and the intact fabric beside a faulty one;
    the job's all-reduce through the door), the what-ifs, the busbw curve and the work estimate.
``training``
    one training step of a workload on a fabric (docs/train.md): compute, and every parallel
    group's collectives priced through the door.

Modules here import the design stage (``topo.spec``, ``topo.fabric``, ``topo.workload``, ...) and
each other, never ``topo.outputs`` or the CLI; none imports ``analyze``, which runs the others.
"""
