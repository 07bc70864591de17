"""One run of Hybrid or one of its baselines (002 Tables 1, 2, 5), with its accounting.

Example level (002 Tables 1, 2, 5): every training row is one example. The privacy of the run
is the sum of the phases' (basic composition, 002 Proposition 2): eps1 (phase 1, pure) plus the
accountant's eps2 for exactly the phase-2 DP-SGD that ran, under both neighbouring relations;
the record keeps each phase's part. Metric: ``test_auc`` (tables derive 002's relative AUC loss
against the table's non-private runs).

Data deviation, stated in every record: on Criteo Attribution the runs use the suite's one
preparation (000 D.3: 200,000 training users / 50,000 disjoint test users, clicked rows) rather
than 002's random 80/20 split of all rows.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from labeldp import accounting
from labeldp.accounting import label_events
from labeldp.methods.base import MethodResult, PrivacyOutcome, RunSpec, check_options

__all__ = ["run_hybrid", "evaluate_auc", "hybrid_model", "PHASE1_HPARAMS", "PHASE2_HPARAMS"]

PHASE1_HPARAMS = ("learning_rate", "epochs", "batch_size")
PHASE2_HPARAMS = ("dp_learning_rate", "dp_epochs", "dp_batch_size", "clip_norm")


def _model(data):
    from labeldp.ads.model import AdsMLP, embedding_dims, model_for

    cfg = model_for(data.name)
    sensitive = set(data.sensitive_features)
    if not sensitive:
        raise ValueError(f"{data.name} names no sensitive features (metadata sensitive_features); Hybrid needs them")
    cats, nums = data.metadata.get("categorical_features", []), data.metadata.get("numerical_features", [])
    if len(cats) != len(data.cat_vocab_sizes):
        raise ValueError(f"{data.name}: metadata categorical_features does not match the vocabularies")
    model = AdsMLP(
        hidden=cfg.hidden,
        vocab_sizes=tuple(data.cat_vocab_sizes),
        embed_dims=embedding_dims(data.cat_vocab_sizes, rule=cfg.embedding),
        sensitive_cat=tuple(c in sensitive for c in cats),
        sensitive_num=tuple(c in sensitive for c in nums[: data.x_num_train.shape[1]]),
    )
    return cfg, model


def evaluate_auc(model, out, data) -> tuple[float, bool]:
    """Test AUC of what :func:`labeldp.ads.hybrid.train_hybrid` trained (the truncated model when
    only phase 1 ran) and whether every prediction was finite (NaN AUC otherwise)."""
    import jax
    from sklearn.metrics import roc_auc_score

    from labeldp.ads.model import two_class_logits
    from labeldp.ads.train import predict_proba

    y_test = np.asarray(data.y_test, np.int32)
    if out["truncated"]:  # RR only: the truncated model is what was trained
        logits = two_class_logits(model, truncated=True)
        probs = np.concatenate(
            [
                np.asarray(
                    jax.nn.softmax(
                        logits(out["params"], (data.x_num_test[i : i + 16384], data.x_cat_test[i : i + 16384]))
                    )[:, 1]
                )
                for i in range(0, len(y_test), 16384)
            ]
        )
    else:
        probs = predict_proba(model, out["params"], data.x_num_test, data.x_cat_test)
    finite = bool(np.all(np.isfinite(probs)))
    return (float(roc_auc_score(y_test, probs)) if finite else float("nan")), finite


hybrid_model = _model


def run_hybrid(data, spec: RunSpec, *, rule: str, name: str) -> MethodResult:
    """Trains Hybrid (``rule="hybrid"``), RR on the truncated model (``"rr_only"``) or DP-SGD on
    all features (``"dpsgd_only"``) and evaluates the test AUC.

    Args:
      data: a prepared binary_classification dataset with ``sensitive_features``.
      spec: the run; hparams: phase 1 :data:`PHASE1_HPARAMS` and/or phase 2 :data:`PHASE2_HPARAMS`.
      rule: the budget split (:func:`labeldp.ads.hybrid.split_budget`).
      name: the method id (for messages).

    Returns:
      A :class:`MethodResult` with ``test_auc`` and the composed privacy.
    """
    from labeldp.ads.hybrid import PHASE_OPTIMIZERS, HybridConfig, split_budget, train_hybrid
    from labeldp.methods.private_training import account_run

    if getattr(data, "task", None) != "binary_classification":
        raise ValueError(f"{name} needs binary ads data with sensitive features (criteo_attribution, criteo_pctr)")
    check_options(spec, (), name)
    eps1, eps2 = split_budget(spec.epsilon, rule=rule)
    hp = dict(spec.hparams)
    cfg_model, model = _model(data)
    opt = PHASE_OPTIMIZERS.get(data.name, ("rmsprop", "adam"))
    n = int(data.y_train.shape[0])
    hcfg = HybridConfig(
        learning_rate=float(hp.get("learning_rate", 0.0) or 0.0),
        epochs=int(hp.get("epochs", 0) or 0),
        batch_size=int(hp.get("batch_size", 1) or 1),
        dp_learning_rate=float(hp.get("dp_learning_rate", 0.0) or 0.0),
        dp_epochs=int(hp.get("dp_epochs", 0) or 0),
        dp_batch_size=int(hp.get("dp_batch_size", 1) or 1),
        clip_norm=float(hp.get("clip_norm", 1.0) or 1.0),
        optimizers=opt,
    )
    plan = acc = None
    sigma, steps, accounting_seconds = None, 0, 0.0
    if eps2 > 0:
        phase2 = dataclasses.replace(
            spec, epsilon=eps2, hparams={"batch_size": hcfg.dp_batch_size, "epochs": hcfg.dp_epochs}
        )
        plan = account_run(phase2, n=n)
        acc, sigma, steps, accounting_seconds = plan.accounting, plan.noise_multiplier, plan.steps, plan.seconds
    t0 = time.perf_counter()
    out = train_hybrid(
        model,
        x_num=data.x_num_train,
        x_cat=data.x_cat_train,
        y=np.asarray(data.y_train, np.int64),
        eps1=eps1,
        plan=plan,
        cfg=hcfg,
        seed=spec.seed,
    )
    seconds = time.perf_counter() - t0
    auc, finite = evaluate_auc(model, out, data)
    by_rel = {
        rel: eps1 + (float(acc.epsilon_by_relation[rel]) if acc is not None else 0.0) for rel in accounting.RELATIONS
    }
    relation = (
        acc.neighboring_relation if acc is not None else accounting.relation_name(label_events.LABEL_EVENT_RELATION)
    )
    privacy = PrivacyOutcome(
        epsilon=by_rel[relation],
        delta=float(acc.delta) if acc is not None else 0.0,
        mechanism=(
            f"{name}: phase 1 RR at eps1 = {eps1:.6g} on the truncated model (debiased loss), phase 2 DP-SGD "
            f"at eps2 = {eps2:.6g} on all features; basic composition (002 Proposition 2); neighbours differ "
            "in one example's sensitive features and label"
        ),
        accounting=None if acc is None else {**acc.to_dict(), "phase1_epsilon": eps1},
        neighboring_relation=relation,
        epsilon_by_relation=by_rel if acc is not None else None,
        event=_composed_event(eps1, acc),
    )
    return MethodResult(
        metrics={
            "test_auc": auc,
            "diverged": not finite,
            "phase1_final_loss": out["phase1_loss"],
            "phase2_final_loss": out["phase2_loss"],
            "steps": steps,
        },
        privacy=privacy,
        timings={"train_seconds": seconds, "accounting_seconds": accounting_seconds},
        details={
            "epsilon1": eps1,
            "epsilon2": eps2,
            "noise_multiplier": sigma,
            "phase2_steps": steps,
            **(out.get("phase2_clipping") or {}),
            "sampling_rate": (hcfg.dp_batch_size / n) if sigma is not None else None,
            "label_noise_rate": out["label_noise_rate"],
            "optimizers": list(opt),
            "model": cfg_model.to_dict(),
            "sensitive_features": list(data.sensitive_features),
            "data_deviation": (
                "000's user-split preparation, not 002's random 80/20 split"
                if data.name == "criteo_attribution" and (data.metadata.get("split") or {}).get("kind") == "users"
                else None
            ),
        },
    )


def _composed_event(eps1: float, acc):
    """The run's label event: phase 1's binary RR at eps1 on every label, then phase 2's DP-SGD event
    (its accountant's), composed; None for DP-SGD alone (its event is the accountant's record's)."""
    rr = label_events.randomized_response_event(epsilon=eps1, num_classes=2) if eps1 > 0 else None
    if acc is None or rr is None:
        return rr
    return label_events.composed_label_event([rr, acc.dp_event()])
