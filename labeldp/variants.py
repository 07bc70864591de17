"""Method variants: a table column's option set, by name, from the config's ``variants`` block.

A variant may extend another of the same method (``extends``), so an option set shared by several
layered config files is spelled once (config.yaml's ``converged_n64``) and a record stores the resolved
options whichever file spelled them.
"""

from __future__ import annotations

from typing import Any, Mapping

from labeldp.config_error import ConfigError

__all__ = ["VARIANT_EXTENDS", "all_variant_options", "variant_options"]

#: The variant key that names another variant of the same method to start from (its options, then these).
VARIANT_EXTENDS = "extends"


def variant_options(config: Mapping[str, Any], method: str, variant: str) -> dict[str, Any]:
    """The options of ``variants.<method>.<variant>``, with ``extends: <other variant>`` resolved.

    A variant may start from another of the same method, defined in any layered config file
    (``{extends: converged_n64, momentum: 0.9}``): the base's resolved options, then its own on top.
    So a variant is defined once, in the file every layer shares, and a record's options are the
    resolved ones whichever file spelled them.

    Args:
      config: the merged workflow config (its ``variants`` block).
      method: the method id.
      variant: the variant's name (``default`` is ``{}`` unless the config defines it).

    Returns:
      A new dict of the resolved options (the config is not changed), without the ``extends`` key.

    Raises:
      ConfigError: the variant (or a base it extends) is not defined, or the chain of bases loops.
    """
    names, layers = [variant], []
    known = (config.get("variants") or {}).get(method) or {}
    while True:
        name = names[-1]
        if name not in known and name == "default":
            opts: dict[str, Any] = {}
        elif name in known:
            opts = dict(known[name])
        else:
            via = f" (extended by {names[-2]!r})" if len(names) > 1 else ""
            raise ConfigError(f"variants.{method}.{name} is not defined in the config{via}")
        base = opts.pop(VARIANT_EXTENDS, None)
        layers.append(opts)
        if base is None:
            break
        if not isinstance(base, str) or base in names:
            raise ConfigError(
                f"variants.{method}.{name}.{VARIANT_EXTENDS}: {base!r} must name another variant of {method} "
                f"without looping back (chain: {' -> '.join(names)}); fix the {VARIANT_EXTENDS} key"
            )
        names.append(base)
    merged: dict[str, Any] = {}
    for own in reversed(layers):
        merged.update(own)
    return merged


def all_variant_options(config: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every defined variant of every method, resolved: ``{(method, variant): options}``.

    Config validation resolves them all, so a broken ``extends`` is reported even in a variant no
    table uses yet.

    Args:
      config: the merged workflow config.

    Returns:
      The resolved options of each ``variants.<method>.<variant>``.

    Raises:
      ConfigError: a variant's body is not a mapping, or its ``extends`` chain is broken.
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for method, variants in (config.get("variants") or {}).items():
        for name, body in (variants or {}).items():
            if not isinstance(body, Mapping):
                raise ConfigError(f"variants.{method}.{name} must be a mapping of options, got {body!r}")
            out[(method, name)] = variant_options(config, method, name)
    return out
