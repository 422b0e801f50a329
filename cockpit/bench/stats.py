"""Mean, standard deviation and a Student-t confidence interval of a few repeated measurements.

``bench --repeat N`` measures every cell N times; each figure of the cell is then summed up as
:class:`Spread`: the mean, the sample standard deviation (n - 1) and the two-sided 95 % confidence
interval of the mean, ``mean ± t(0.975, n - 1) · s / √n``. The t quantiles for 1..30 degrees of freedom
are the tabulated values; above 30 the Cornish-Fisher expansion on the normal quantile
(:class:`statistics.NormalDist`) is within 0.001 of them. Fewer than two values have no spread (None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""t(0.975, df) for df = 1..30."""


def t_975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (two-sided 95 %)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if df <= len(T_975):
        return T_975[df - 1]
    z = NormalDist().inv_cdf(0.975)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


@dataclass(frozen=True, slots=True)
class Spread:
    """N measurements of one figure: mean, sample std and the 95 % confidence interval of the mean."""

    n: int
    mean: float
    std: float | None
    ci95_low: float | None
    ci95_high: float | None

    @property
    def half_width(self) -> float | None:
        return None if self.ci95_high is None else self.ci95_high - self.mean

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean": _r(self.mean), "std": _r(self.std), "ci95": (
            None if self.ci95_low is None else [_r(self.ci95_low), _r(self.ci95_high)])}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Spread | None:
        mean, n = d.get("mean"), d.get("n")
        if not isinstance(mean, int | float) or not isinstance(n, int):
            return None
        ci = d.get("ci95")
        low, high = (ci if isinstance(ci, list) and len(ci) == 2 else (None, None))
        std = d.get("std")
        return cls(n, float(mean), float(std) if isinstance(std, int | float) else None,
                   float(low) if isinstance(low, int | float) else None,
                   float(high) if isinstance(high, int | float) else None)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def spread(values: Iterable[float | None]) -> Spread | None:
    """The spread of the known, finite values (None: none known)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return None
    mean = fmean(xs)
    if len(xs) < 2:
        return Spread(len(xs), mean, None, None, None)
    s = stdev(xs)
    half = t_975(len(xs) - 1) * s / math.sqrt(len(xs))
    return Spread(len(xs), mean, s, mean - half, mean + half)
