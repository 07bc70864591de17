"""Group privacy: the item-level budget that gives a user-level guarantee.

* 000 -- LabelDP-Pro (Section 6: group privacy, Table 7).
* 002 -- semi-sensitive features (Proposition 6: group privacy).

Re-exported by :mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from labeldp.mechanisms.classification_validation import check_epsilon

__all__ = [
    "PrivacyBudget",
    "group_privacy",
]


# ---------------------------------------------------------------------------
# Group privacy (000 Section 6; 002 Proposition 6).
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PrivacyBudget:
    """An (epsilon, delta) pair."""

    epsilon: float
    delta: float = 0.0


def group_privacy(
    *,
    epsilon: float,
    delta: float = 0.0,
    group_size: int,
    conversion: Literal["labeldp_pro", "geometric_sum"] = "labeldp_pro",
) -> PrivacyBudget:
    """Item-level budget that gives a user-level (epsilon, delta) guarantee.

    A user contributes ``group_size = k`` examples. By group privacy (Vadhan
    2017), an item-level ``(e, d)``-DP mechanism is user-level
    ``(k e, d * sum_{j<k} e^{j e}) = (k e, d (e^{k e} - 1) / (e^e - 1))``-DP.

    * ``delta == 0`` (pure DP, e.g. RR in 000 Table 7): ``(epsilon / k, 0)``.
    * ``conversion="labeldp_pro"`` (default; 000 Section 6):
      ``(epsilon / k, delta / (k e^epsilon))``. Valid (conservative) because
      ``sum_{j<k} e^{j epsilon / k} <= k e^epsilon``.
    * ``conversion="geometric_sum"`` (002 Proposition 6, inverted exactly):
      ``(epsilon / k, delta (e^{epsilon/k} - 1) / (e^epsilon - 1))``. The
      extracted text of 002 shows ``e^{k eps - 1}`` in the numerator; that is a
      typesetting slip for ``e^{k eps} - 1`` (only the latter gives ``delta``
      back at ``k = 1``).

    Args:
      epsilon: user-level epsilon, > 0.
      delta: user-level delta in ``[0, 1)``.
      group_size: examples per user, an integer >= 1.
      conversion: which approximate-DP conversion to use (ignored if
        ``delta == 0``).

    Returns:
      :class:`PrivacyBudget` with the item-level (epsilon, delta).
    """
    eps = check_epsilon(epsilon)
    if not isinstance(delta, (int, float, np.floating)) or not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be a float in [0, 1), got {delta!r}.")
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1 (examples per user), got {group_size!r}.")
    k = int(group_size)
    item_eps = eps / k
    if delta == 0.0:
        return PrivacyBudget(epsilon=item_eps, delta=0.0)
    if conversion == "labeldp_pro":
        item_delta = float(delta) / (k * math.exp(eps))
    elif conversion == "geometric_sum":
        item_delta = float(delta) * math.expm1(item_eps) / math.expm1(eps)
    else:
        raise ValueError(
            "conversion must be 'labeldp_pro' (000 Section 6) or 'geometric_sum' "
            f"(002 Proposition 6), got {conversion!r}."
        )
    return PrivacyBudget(epsilon=item_eps, delta=item_delta)
