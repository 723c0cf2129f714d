"""Fit the Broadcom headroom constants of topo/qos.py to the Tomahawk SKUs' tables.

For each Tomahawk generation with a ``pg_profile_lookup.ini`` in ``topo/data/platforms.yaml``, find
the constants of

    xoff = A + B * S + C * cable(S, L)      (S the port's speed class in Gb/s, L the cable in metres,
                                             cable() the bytes on the cable both ways)

that make the largest relative error over the table's rows as small as it can be (a linear
programme), and print them with that error. ``BROADCOM_ASICS`` in topo/qos.py holds the
result; tests/test_platforms.py checks that it still matches and that every row is within 10 %.

    python scripts/fit_headroom.py
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from topo.catalog import platform_catalog
from topo.qos import BROADCOM_ASICS, cable_bytes


def fit(asic: str) -> tuple[float, float, float, float]:
    """(A, B, C, largest relative error) of the least-worst fit for one Tomahawk generation."""
    model = BROADCOM_ASICS[asic]
    p = platform_catalog()[model.fitted_on]
    rows = p.headroom_table
    speed = np.array([model.speed_class(int(r["speed"]) // 1000) for r in rows], float)
    cable = np.array([cable_bytes(s, float(str(r["cable"]).rstrip("m"))) for s, r in zip(speed, rows)])
    y = np.array([float(r["xoff"]) for r in rows])
    x = np.stack([np.ones_like(speed), speed, cable], axis=1)
    # variables A, B, C, t: minimise t with |x @ (A, B, C) - y| <= t * y
    cost = np.array([0.0, 0.0, 0.0, 1.0])
    a_ub = np.vstack([np.c_[x, -y], np.c_[-x, -y]])
    b_ub = np.r_[y, -y]
    # one speed only: the fixed and the per-speed parts cannot be told apart; charge it all per speed
    fixed = (0.0, 0.0) if len(set(speed)) == 1 else (0.0, None)
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[fixed, (0, None), (1, None), (0, None)], method="highs")
    a, b, c, t = res.x
    return float(a), float(b), float(c), float(t)


def main() -> None:
    for asic, model in BROADCOM_ASICS.items():
        a, b, c, t = fit(asic)
        print(f"{asic:12s} fitted on {model.fitted_on}: fixed_bytes={a:.0f} per_gbps_bytes={b:.2f} "
              f"cable_factor={c:.3f}  largest error {100 * t:.1f} %")


if __name__ == "__main__":
    main()
