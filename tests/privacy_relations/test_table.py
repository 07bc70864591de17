"""docs/privacy_relations.md against the code: one property check per row of its table.

The table states, for every mechanism / method of the suite, the neighbouring relation its
guarantee is stated for and the sensitivity its noise is calibrated to. This module parses the
table, requires exactly the expected set of rows (a new row without a check fails, a removed row
fails, a new method without a row fails), and runs ``test_row_<id>`` for each row: a check that
would fail if the row's stated relation or sensitivity were wrong for the code.

Kept small (tiny shapes, few accountant calls): the whole module runs in well under a minute on
two shared CPU cores.
"""

from __future__ import annotations


import pytest


from tests.privacy_relations.doc import *  # noqa: F401,F403  (the parsed table and shared helpers)


# ------------------------------------------------------------------------------------------
# The table itself
# ------------------------------------------------------------------------------------------


def test_header_is_exact():
    assert HEAD == HEADER


def test_ids_are_exactly_the_expected_set():
    ids = [ticks(r["id"])[0] for r in ROWS]
    assert len(ids) == len(set(ids)), f"duplicate ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    assert set(ids) == EXPECTED_IDS, (
        f"rows without a check: {sorted(set(ids) - EXPECTED_IDS)}; "
        f"checked ids without a row: {sorted(EXPECTED_IDS - set(ids))}"
    )


def test_every_row_names_its_check_and_the_check_exists():
    import importlib

    checks = {}
    for mod in ("classification", "dpsgd", "regression", "ads"):
        module = importlib.import_module(f"tests.privacy_relations.test_{mod}_rows")
        checks.update({n: getattr(module, n) for n in dir(module) if n.startswith("test_row_")})
    for rid, r in BY_ID.items():
        name = f"test_row_{rid}"
        assert ticks(r["checked by"]) == [name], f"row {rid}: 'checked by' must be `{name}`"
        assert callable(checks.get(name)), f"no check {name} for row {rid}"
    assert {n[len("test_row_") :] for n in checks} == EXPECTED_IDS


def test_every_relation_cell_names_a_known_relation():
    from labeldp import accounting

    assert set(accounting.RELATIONS) == BOTH
    for rid, r in BY_ID.items():
        assert relations(r), f"row {rid} names no relation in backticks"
        if relations(r) == LABEL_ONLY:
            assert "n/a" in r["relation its guarantee is stated for"], rid


def test_every_private_method_of_the_registry_has_a_row():
    from labeldp.methods import registry

    methods = set()
    for name in registry.implemented_methods():
        try:
            registry.get_method(name)
        except (TypeError, KeyError):
            continue  # a helper module in a method package, not a method
        methods.add(name)
    assert methods - {"nonprivate"} <= set(BY_ID), (
        f"methods without a row in docs/privacy_relations.md: {sorted(methods - {'nonprivate'} - set(BY_ID))}"
    )


def test_intro_factor_matches_the_accountant():
    """The intro's numbers: sigma 1.7556, q = 1024/60000, 585 steps, delta 1e-5."""
    from labeldp import accounting

    intro = " ".join(TEXT.split("| id |")[0].replace("**", "").split())
    assert "sigma 1.7556" in intro and "1024/60000" in intro and "585 steps" in intro
    eps = {
        rel: accounting.dpsgd_epsilon(
            noise_multiplier=1.7556, sampling_rate=1024 / 60000, steps=585, delta=1e-5, neighboring_relation=rel
        )
        for rel in accounting.RELATIONS
    }
    assert f"eps {eps['add_or_remove']:.2f} under add/remove" in intro
    assert f"eps {eps['label_substitution']:.2f} under label substitution" in intro
    assert eps["label_substitution"] / eps["add_or_remove"] == pytest.approx(1.9, abs=0.05)
