"""JSON round trip of ``dp_accounting`` events, so records can be re-accounted.

A result record stores the accounted ``DpEvent`` as a plain dict
(:func:`describe_event`); :func:`event_from_description` rebuilds it exactly, so
a record can be re-accounted later (e.g. under another neighbouring relation,
``workflow/scripts/reaccount_records.py``) without retraining.
"""

from __future__ import annotations

from typing import Any

from dp_accounting import dp_event as dp_event_lib

__all__ = ["describe_event", "event_from_description"]


def _named_tuple_to_dict(value: Any) -> Any:
    if hasattr(value, "_fields"):
        return {f: _named_tuple_to_dict(getattr(value, f)) for f in value._fields}
    if isinstance(value, (list, tuple)):
        return [_named_tuple_to_dict(v) for v in value]
    return value


def describe_event(event: dp_event_lib.DpEvent) -> dict[str, Any]:
    """JSON-friendly description of a ``DpEvent`` (via ``to_named_tuple``).

    Args:
      event: any ``dp_accounting`` event.

    Returns:
      Nested dict with ``module_name``, ``class_name`` and the event's fields,
      e.g. ``{'class_name': 'SelfComposedDpEvent', 'count': 600, 'event':
      {...}}``. :func:`event_from_description` inverts it.
    """
    return _named_tuple_to_dict(event.to_named_tuple())


def event_from_description(description: dict[str, Any]) -> dp_event_lib.DpEvent:
    """Rebuilds the ``DpEvent`` written by :func:`describe_event`.

    Only classes of ``dp_accounting.dp_event`` are accepted.

    Args:
      description: the dict :func:`describe_event` wrote.

    Returns:
      The event, equal (``==``) to the one described.

    Raises:
      ValueError: not such a dict, or a class outside ``dp_accounting.dp_event``.
    """
    if not isinstance(description, dict) or "class_name" not in description:
        raise ValueError(
            f"description must be a dict produced by describe_event (with a 'class_name' key), got {description!r}."
        )
    if description.get("module_name") != dp_event_lib.__name__:
        raise ValueError(
            f"only {dp_event_lib.__name__} events can be rebuilt, got module {description.get('module_name')!r}."
        )
    cls = getattr(dp_event_lib, description["class_name"], None)
    if not (isinstance(cls, type) and issubclass(cls, dp_event_lib.DpEvent)):
        raise ValueError(f"unknown DpEvent class {description['class_name']!r}.")

    def convert(value: Any) -> Any:
        if isinstance(value, dict) and "class_name" in value:
            return event_from_description(value)
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    fields = {k: convert(v) for k, v in description.items() if k not in ("module_name", "class_name")}
    return cls(**fields)
