"""Argument checks and the neighbouring relations of :mod:`labeldp.accounting`.

Every public function of the package validates its arguments here, so bad input
raises a ``ValueError`` naming the argument and the fix.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, Optional

import dp_accounting

Accountant = Literal["pld", "rdp"]

#: Default PLD value discretisation interval relative to the epsilon measured.
RELATIVE_DISCRETIZATION = 1e-3
MAX_VDI = 1e-2
MIN_VDI = 1e-6
#: Relative tolerance on the noise multiplier in calibration.
SIGMA_RTOL = 1e-4
SIGMA_MIN = 1e-3
SIGMA_MAX = 1e7
#: A neighbouring relation is ``dp_accounting``'s enum everywhere in the code; its name below
#: (``"add_or_remove"``, ``"label_substitution"``) appears only in YAML configs and JSON records.
Relation = dp_accounting.NeighboringRelation
#: One example added or removed (unit sensitivity): the papers' convention, 000 Section 3.4.
ADD_OR_REMOVE = Relation.ADD_OR_REMOVE_ONE
#: One example's label replaced: label DP exactly (000 Definition 2).
LABEL_SUBSTITUTION = Relation.REPLACE_ONE
#: The relations this package accounts under, by their config / record name.
NEIGHBORING_RELATIONS = {"add_or_remove": ADD_OR_REMOVE, "label_substitution": LABEL_SUBSTITUTION}
#: The config / record name of each relation.
RELATION_NAMES = {relation: name for name, relation in NEIGHBORING_RELATIONS.items()}
#: The names, in the order records list them (the keys of ``epsilon_by_relation``).
RELATIONS = tuple(NEIGHBORING_RELATIONS)
#: The papers' convention (000 Section 3.4), the default everywhere.
DEFAULT_RELATION = ADD_OR_REMOVE
#: Spelling of ``add_or_remove`` in records made before the relation was a
#: parameter.
_LEGACY_NAMES = {"add_or_remove_one": "add_or_remove"}


# ---------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------


def check_positive(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive float, got {value!r}.") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite float, got {value!r}.")
    return v


def check_sampling_rate(q: Any) -> float:
    try:
        v = float(q)
    except (TypeError, ValueError):
        raise ValueError(f"sampling_rate must be a float in (0, 1], got {q!r}.") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1] (expected batch size / data set size, n1 / n), got {q!r}.")
    return v


def check_steps(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1 (number of noisy gradient steps), got {steps!r}.")
    return int(steps)


def check_delta(delta: Any, name: str = "delta") -> float:
    try:
        v = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a float in (0, 1), got {delta!r}.") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1) (e.g. 1e-5, or 1 / n_users), got {delta!r}.")
    return v


def check_accountant(accountant: Any) -> str:
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' (default) or 'rdp', got {accountant!r}.")
    return accountant


def to_relation(relation: Any) -> Relation:
    """A neighbouring relation as ``dp_accounting``'s enum.

    Args:
      relation: ``Relation.ADD_OR_REMOVE_ONE`` or ``Relation.REPLACE_ONE``, or the name a config
        or record gives it: ``'add_or_remove'`` or ``'label_substitution'`` (the legacy record
        spelling ``'add_or_remove_one'`` is accepted).

    Returns:
      The enum member.

    Raises:
      ValueError: any other value (``REPLACE_SPECIAL`` included), naming the accepted ones.
    """
    if isinstance(relation, Relation):
        if relation in RELATION_NAMES:
            return relation
    elif isinstance(relation, str):
        name = _LEGACY_NAMES.get(relation, relation)
        if name in NEIGHBORING_RELATIONS:
            return NEIGHBORING_RELATIONS[name]
    raise ValueError(
        f"neighboring_relation must be one of {list(RELATIONS)} (or dp_accounting's ADD_OR_REMOVE_ONE / "
        "REPLACE_ONE) ('add_or_remove': the papers' convention; 'label_substitution': "
        f"label DP exactly, dp_accounting's REPLACE_ONE), got {relation!r}."
    )


def relation_name(relation: Any) -> str:
    """The config / record name of a relation (:func:`to_relation` checks it)."""
    return RELATION_NAMES[to_relation(relation)]


def check_relation(relation: Any) -> str:
    """The canonical name of a neighbouring relation (for configs and records).

    Args:
      relation: as :func:`to_relation`.

    Returns:
      ``'add_or_remove'`` or ``'label_substitution'``.

    Raises:
      ValueError: any other value, naming the accepted ones.
    """
    return relation_name(relation)


def check_accountant_relation(accountant: str, relation: Relation) -> None:
    if accountant == "rdp" and relation is not ADD_OR_REMOVE:
        raise ValueError(
            "dp_accounting's RDP accountant has no REPLACE_ONE analysis of the "
            "Poisson-subsampled Gaussian, so it cannot account under "
            f"neighboring_relation={relation_name(relation)!r}; use accountant='pld'."
        )


def check_vdi(vdi: Any) -> Optional[float]:
    if vdi is None:
        return None
    return check_positive(vdi, "value_discretization_interval")
