"""labeldp.variants: a variant's options, with ``extends`` resolved; every config's variants resolve."""

import pytest

from labeldp.config import SCHEMA, validate_config
from labeldp.config_error import ConfigError
from labeldp.variants import all_variant_options, variant_options
from tests.helpers import repo_config


def _variants_config(variants: dict) -> dict:
    return {"variants": {"labeldp_pro": variants}}


def test_a_variant_extends_another_and_its_own_options_win():
    cfg = _variants_config(
        {
            "base": {"denoiser": "alt_conv", "alt_batch_size": 64, "projection_tol": 1e-3},
            "mid": {"extends": "base", "alt_batch_size": 32},
            "top": {"extends": "mid", "momentum": 0.9, "projection_tol": 1e-2},
        }
    )
    assert variant_options(cfg, "labeldp_pro", "top") == {
        "denoiser": "alt_conv",
        "alt_batch_size": 32,
        "projection_tol": 1e-2,
        "momentum": 0.9,
    }
    assert variant_options(cfg, "labeldp_pro", "base") == cfg["variants"]["labeldp_pro"]["base"]
    assert "extends" in cfg["variants"]["labeldp_pro"]["top"]  # the config itself is not changed


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ({"a": {"extends": "missing"}}, "variants.labeldp_pro.missing is not defined in the config (extended by 'a')"),
        ({"a": {"extends": "b"}, "b": {"extends": "a"}}, "chain: a -> b"),
        ({"a": {"extends": "a"}}, "without looping back"),
        ({"a": {"extends": 3}}, "must name another variant"),
    ],
)
def test_a_bad_extends_names_the_key(variants, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        variant_options(_variants_config(variants), "labeldp_pro", "a")


def test_default_is_empty_unless_defined_and_may_be_extended():
    assert variant_options({}, "rr", "default") == {}
    cfg = _variants_config({"default": {"denoiser": "alt_conv"}, "k2": {"extends": "default", "examples_per_user": 2}})
    assert variant_options(cfg, "labeldp_pro", "k2") == {"denoiser": "alt_conv", "examples_per_user": 2}


@pytest.mark.parametrize("layer", ["protocol_cpu.yaml", "labeldp_pro_cpu.yaml"])
def test_the_dated_cpu_configs_resolve_the_base_configs_converged_projection(layer):
    """The converged projection is spelled once (config.yaml's converged_n64); the dated CPU configs'
    variants resolve to it with their own changes, and no resolved variant keeps an ``extends`` key."""
    cfg = repo_config(layer)
    base = variant_options(cfg, "labeldp_pro", "converged_n64")
    assert base["alt_batch_size"] == 64 and base["vertices"] == "clipped" and base["projection_tol"] == 1e-3
    for name in cfg["variants"]["labeldp_pro"]:
        opts = variant_options(cfg, "labeldp_pro", name)
        assert "extends" not in opts
        if name.startswith("converged_n64_"):
            assert {k: v for k, v in opts.items() if k in base and k != "momentum"} == base

    if layer == "labeldp_pro_cpu.yaml":  # the YAML anchors these replaced, resolved to the same option sets
        n32 = dict(base, alt_batch_size=32)
        assert variant_options(cfg, "labeldp_pro", "converged_n32") == n32
        assert variant_options(cfg, "labeldp_pro", "converged_n32_tol1e2") == dict(n32, projection_tol=1.0e-2)
        assert variant_options(cfg, "labeldp_pro", "converged_n32_raw") == dict(n32, vertices="raw")
        assert variant_options(cfg, "labeldp_pro", "converged_n128_gram") == dict(
            n32, alt_batch_size=128, projection_solver="gram"
        )
    assert base == {
        "denoiser": "alt_conv",
        "amplification": True,
        "alt_batch_size": 64,
        "vertices": "clipped",
        "coefficient_set": "joint",
        "projection_start": "predicted",
        "projection_tol": 1.0e-3,
    }


def test_validation_resolves_every_variant_even_one_no_table_uses():
    cfg = repo_config("smoke.yaml")
    validate_config(cfg, SCHEMA)
    cfg["variants"]["alibi"]["unused_broken"] = {"extends": "no_such_variant"}
    with pytest.raises(ConfigError, match="variants.alibi.no_such_variant is not defined"):
        validate_config(cfg, SCHEMA)
    resolved = all_variant_options(repo_config("protocol_cpu.yaml"))
    assert resolved[("alibi", "official_recipe_test_curve")]["test_curve_diagnostic"] is True
    assert not any("extends" in opts for opts in resolved.values())
