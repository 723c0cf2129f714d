"""The analyses: pure functions of a built Fabric that return frozen results with ``to_dict()``.

In the order they build on each other:

``faults``
    links and switches taken out of a fabric (named, or a seeded random fraction).
``updown``
    valley-free (up-down) reachability between leaves, as an RFC 7938 underlay routes.
``hops``, ``ecmp``, ``bisection``
    hop counts between GPUs, ECMP width between leaves and pods, bisection bandwidth (analytic and
    scipy max-flow).
``collective``, ``routing``, ``congestion``
    the same-rank all-reduce's connections, their paths (ECMP hashing or adaptive routing) and
    their rates under the lossless congestion model (max-min fair under ECN, or PFC pauses).
``analyze``
    :func:`topo.analysis.analyze.analyze` runs them all (and the intact fabric beside a faulty one).

Modules here import the design stage (``topo.spec``, ``topo.fabric``, ...) and each other, never
``topo.outputs`` or the CLI.
"""
