"""Empirical label-DP auditing (one training run; Steinke, Nasr & Jagielski 2023)."""

from labeldp.audit.one_run import (
    AuditResult,
    LabelCanaries,
    audit,
    canary_scores,
    epsilon_lower_bound,
    guesses_from_scores,
    make_label_canaries,
    p_value,
)

__all__ = [
    "AuditResult",
    "LabelCanaries",
    "audit",
    "canary_scores",
    "epsilon_lower_bound",
    "guesses_from_scores",
    "make_label_canaries",
    "p_value",
]
