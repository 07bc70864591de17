"""User-level Hybrid and its two baselines (002 Section 4, Appendix A, Table 3).

Two data sets are user-level adjacent when the sensitive features and labels of ANY of one
user's examples change (002 Section 2). 002 gets user-level DP from example-level DP through its
Proposition 6 (group privacy): keep at most k examples per user, then a mechanism that is
``(e, d)``-DP per example is ``(k e, d (e^{k e} - 1) / (e^e - 1))``-DP per user. As 002
Appendix A does:

* every user's examples are capped at k and sampled WITH replacement up to k
  (:func:`labeldp.data.sources.criteo_attribution.cap_examples_per_user` with ``with_replacement``);
* ``phase_split: rr`` (RR on the truncated model): RR at ``eps / k`` on each of the user's k
  labels (pure DP, group privacy gives eps per user), 002's debiased loss;
* ``phase_split: dpsgd`` (DP-SGD on all features): example-level DP-SGD on the U k capped rows,
  calibrated to the item-level budget that Proposition 6 turns into the user-level (eps, delta):
  ``(eps / k, delta (e^{eps/k} - 1) / (e^eps - 1))``
  (:func:`labeldp.mechanisms.classification.group_privacy`, ``conversion="geometric_sum"``);
* ``phase_split: hybrid``: ``eps1 = min(0.6 eps, 3)`` (002's split), phase 1 with the example cap
  1 (one example per user, RR at eps1: user-level eps1 with no group factor), phase 2 as the
  DP-SGD baseline at ``eps2 = eps - eps1`` with the cap k; basic composition, ``eps1 + eps2``.

Steps (002 Appendix A): "we fix the number of training steps for each cap to be the same as for
the largest cap trained with one epoch": phase 2 runs ``floor(dp_epochs U K_MAX / dp_batch_size)``
steps with ``K_MAX = 10`` (002's largest cap), Poisson sampling at ``q = dp_batch_size / (U k)``,
accounted for exactly those.

Eps under both neighbouring relations, at the run's user-level delta: for each relation, the item
level eps e of the DP-SGD that ran (dp_accounting) at the item delta ``delta (e^e - 1) / (e^{k e} -
1)`` that Proposition 6 turns back into ``delta``, a fixed point found by iteration and rounded up
(:func:`user_level_epsilon`; for the relation that calibrated sigma, the calibration's own pair);
the record stores ``k e`` (plus eps1) and the user-level delta it certifies
(``details.user_delta_by_relation``, at most the run's delta).
"""

from __future__ import annotations

import math
from typing import Callable
import time

import numpy as np

from labeldp import accounting
from labeldp.accounting import label_events
from labeldp.ads.hybrid import PHASE_OPTIMIZERS, HybridConfig, split_budget, train_hybrid
from labeldp.ads.hybrid_run import PHASE1_HPARAMS, PHASE2_HPARAMS, evaluate_auc, hybrid_model
from labeldp.data.sources.criteo_attribution import cap_examples_per_user
from labeldp.dpsgd.training_plan import make_training_plan
from labeldp.mechanisms.classification import group_privacy
from labeldp.methods.base import MethodResult, PrivacyOutcome, RunSpec, check_options, label_dp_outcome

__all__ = ["run_hybrid_user_level", "OPTIONS", "PHASE_SPLITS", "K_MAX", "user_level_delta", "user_level_epsilon"]

OPTIONS = ("examples_per_user", "phase_split")
PHASE_SPLITS = {"rr": "rr_only", "dpsgd": "dpsgd_only", "hybrid": "hybrid"}
K_MAX = 10  # 002's largest example cap: phase 2's step count is one epoch of it
CAP_STREAMS = (21, 22)  # cap seeds of phase 1 and phase 2 rows: seed * 1000 + stream


def user_level_delta(*, item_epsilon: float, item_delta: float, k: int) -> float:
    """002 Proposition 6: the user-level delta of an ``(item_epsilon, item_delta)``-DP mechanism
    over at most ``k`` examples per user, ``item_delta (e^{k e} - 1) / (e^e - 1)`` (``k item_delta``
    as ``e -> 0``)."""
    e, k = float(item_epsilon), int(k)
    if k == 1:
        return float(item_delta)
    if e <= 0:
        return float(item_delta) * k
    return float(item_delta) * math.expm1(k * e) / math.expm1(e)


def user_level_epsilon(
    eps_at: Callable[[float], float], *, user_delta: float, k: int, rtol: float = 1e-4
) -> tuple[float, float, float]:
    """The user-level eps of a mechanism over at most ``k`` examples per user, at ``user_delta``.

    Proposition 6 needs an item-level pair ``(e, d)`` with ``e >= eps_at(d)`` and
    ``d (e^{k e} - 1) / (e^e - 1) <= user_delta``. Iterates ``e <- eps_at(user_delta (e^e - 1) /
    (e^{k e} - 1))`` (increasing from ``eps_at(user_delta / k)``), then rounds ``e`` up by ``rtol``
    and checks that ``eps_at`` of the resulting ``d`` is still at most ``e``.

    Args:
      eps_at: the item-level epsilon of the mechanism at a delta (dp_accounting).
      user_delta: the user-level delta. k: examples per user.
      rtol: the rounding up of the fixed point.

    Returns:
      ``(k e, e, d)``: the user-level eps and the certifying item-level pair.
    """
    k = int(k)
    if k == 1:
        e = float(eps_at(user_delta))
        return e, e, float(user_delta)

    def item_delta(e):
        return float(user_delta) * math.expm1(e) / math.expm1(k * e) if e > 0 else float(user_delta) / k

    e = float(eps_at(item_delta(0.0)))
    for _ in range(60):
        nxt = float(eps_at(item_delta(e)))
        done = abs(nxt - e) <= 0.1 * rtol * max(e, 1e-12)
        e = max(e, nxt)
        if done:
            break
    for _ in range(60):  # round up until the pair certifies itself
        hi = e * (1.0 + rtol) + 1e-12
        d = item_delta(hi)
        if float(eps_at(d)) <= hi:
            return k * hi, hi, d
        e = hi
    raise RuntimeError("user_level_epsilon: the group-privacy fixed point did not settle")


def _capped(data, *, k: int, seed: int, stream: int):
    idx = cap_examples_per_user(data.user_train, k=k, seed=seed * 1000 + stream, with_replacement=True)
    return data.x_num_train[idx], data.x_cat_train[idx], np.asarray(data.y_train[idx], np.int64)


def run_hybrid_user_level(data, spec: RunSpec, *, name: str) -> MethodResult:
    """Trains user-level Hybrid or one of its baselines (module docstring) and evaluates the test AUC.

    Args:
      data: a prepared binary_classification dataset with users (``user_train``) and sensitive
        features (criteo_attribution).
      spec: the run; options ``examples_per_user`` (k >= 1) and ``phase_split`` (rr | dpsgd |
        hybrid); hparams as :mod:`baselines.hybrid` (the phases that run need theirs).
      name: the method id (for messages).

    Returns:
      A :class:`MethodResult` with ``test_auc`` and the user-level privacy (``privacy_unit: "user"``).
    """
    if getattr(data, "task", None) != "binary_classification" or getattr(data, "user_train", None) is None:
        raise ValueError(
            f"{name} needs binary ads data with user ids and sensitive features (criteo_attribution); "
            f"{getattr(data, 'name', '?')} has none"
        )
    check_options(spec, OPTIONS, name)
    missing = [o for o in OPTIONS if o not in spec.options]
    if missing:
        raise ValueError(
            f"{name}: variant {spec.variant!r} must set {missing} (e.g. variants.{name}.hybrid_k5: "
            "{examples_per_user: 5, phase_split: hybrid})"
        )
    k, split = spec.options["examples_per_user"], spec.options["phase_split"]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 1:
        raise ValueError(f"{name}: examples_per_user must be an integer >= 1, got {k!r}")
    if split not in PHASE_SPLITS:
        raise ValueError(f"{name}: phase_split must be one of {sorted(PHASE_SPLITS)}, got {split!r}")
    k = int(k)
    eps1, eps2 = split_budget(spec.epsilon, rule=PHASE_SPLITS[split])
    hp = dict(spec.hparams)

    need = (PHASE1_HPARAMS if eps1 > 0 else ()) + (PHASE2_HPARAMS if eps2 > 0 else ())
    missing = [h for h in need if not hp.get(h)]
    if missing:
        raise ValueError(
            f"{name} (phase_split {split!r}): hyper-parameters {missing} must be set and non-zero in the "
            "table's grid (phase 1: learning_rate, epochs, batch_size; phase 2: dp_learning_rate, "
            "dp_epochs, dp_batch_size, clip_norm)"
        )
    cfg_model, model = hybrid_model(data)
    hcfg = HybridConfig(
        learning_rate=float(hp.get("learning_rate", 0.0) or 0.0),
        epochs=int(hp.get("epochs", 0) or 0),
        batch_size=int(hp.get("batch_size", 1) or 1),
        dp_learning_rate=float(hp.get("dp_learning_rate", 0.0) or 0.0),
        dp_epochs=int(hp.get("dp_epochs", 0) or 0),
        dp_batch_size=int(hp.get("dp_batch_size", 1) or 1),
        clip_norm=float(hp.get("clip_norm", 1.0) or 1.0),
        optimizers=PHASE_OPTIMIZERS.get(data.name, ("rmsprop", "adam")),
    )
    users = int(np.unique(data.user_train).size)
    k1 = k if split == "rr" else 1  # 002: the Hybrid's RR phase uses the example cap 1
    per_label_eps1 = eps1 / k1 if eps1 > 0 else 0.0
    rows2 = _capped(data, k=k, seed=spec.seed, stream=CAP_STREAMS[1])
    rows1 = _capped(data, k=k1, seed=spec.seed, stream=CAP_STREAMS[0]) if eps1 > 0 else None
    plan = acc = item = None
    sigma, steps, accounting_seconds = None, 0, 0.0
    n2 = users * k
    if eps2 > 0:
        if hcfg.dp_batch_size > n2:
            raise ValueError(
                f"{name}: dp_batch_size {hcfg.dp_batch_size} exceeds the {n2} capped rows (U k); lower it in the grid"
            )
        steps = int(math.floor(hcfg.dp_epochs * users * K_MAX / hcfg.dp_batch_size))
        if steps < 1:
            raise ValueError(
                f"{name}: dp_epochs {hcfg.dp_epochs} x {users} users x {K_MAX} / dp_batch_size "
                f"{hcfg.dp_batch_size} is less than one step"
            )
        item = group_privacy(epsilon=eps2, delta=spec.delta, group_size=k, conversion="geometric_sum")
        plan = make_training_plan(
            target_epsilon=item.epsilon,
            target_delta=item.delta,
            n=n2,
            expected_batch_size=hcfg.dp_batch_size,
            steps=steps,
            accountant=spec.accountant,
            neighboring_relation=spec.calibration_relation or accounting.DEFAULT_RELATION,
        )
        acc, sigma, accounting_seconds = plan.accounting, plan.noise_multiplier, plan.seconds
    t0 = time.perf_counter()
    out = train_hybrid(
        model,
        x_num=rows2[0],
        x_cat=rows2[1],
        y=rows2[2],
        eps1=per_label_eps1,
        plan=plan,
        cfg=hcfg,
        seed=spec.seed,
        phase1_rows=rows1,
    )
    seconds = time.perf_counter() - t0
    auc, finite = evaluate_auc(model, out, data)
    details = {
        "examples_per_user": k,
        "phase_split": split,
        "phase1_examples_per_user": k1 if eps1 > 0 else None,
        "users": users,
        "epsilon1": eps1,
        "epsilon2": eps2,
        "phase1_epsilon_per_label": per_label_eps1,
        "noise_multiplier": sigma,
        "phase2_steps": steps,
        "phase2_rows": n2 if eps2 > 0 else None,
        **(out.get("phase2_clipping") or {}),
        "sampling_rate": (hcfg.dp_batch_size / n2) if sigma is not None else None,
        "label_noise_rate": out["label_noise_rate"],
        "optimizers": list(hcfg.optimizers),
        "model": cfg_model.to_dict(),
        "sensitive_features": list(data.sensitive_features),
    }
    if acc is None:  # RR only: pure, exact under label substitution
        privacy = label_dp_outcome(
            epsilon=spec.epsilon,
            privacy_unit="user",
            event=label_events.per_user_label_event(
                label_events.randomized_response_event(epsilon=per_label_eps1, num_classes=2), labels_per_user=k1
            ),
            mechanism=(
                f"{name}: RR at eps/k = {per_label_eps1:.6g} on each of a user's k = {k} labels (group "
                "privacy: eps per user), the truncated model on 002's debiased loss"
            ),
        )
    else:
        event = acc.dp_event()
        by_rel, user_delta, pairs = {}, {}, {}
        for relation, rel in accounting.RELATION_NAMES.items():  # rel: the record's name of the relation
            rel_acc = "pld" if relation is accounting.LABEL_SUBSTITUTION else spec.accountant

            def eps_at(d, relation=relation, rel_acc=rel_acc):
                return float(
                    accounting.event_epsilon(event, delta=d, neighboring_relation=relation, accountant=rel_acc)[0]
                )

            if rel == acc.neighboring_relation:  # the calibration's own pair: (eps <= eps2 / k, the item delta)
                e, d = float(acc.epsilon_by_relation[rel]), float(item.delta)
                user_eps = k * e
            else:
                user_eps, e, d = user_level_epsilon(eps_at, user_delta=spec.delta, k=k)
            by_rel[rel] = eps1 + user_eps
            pairs[rel] = {"epsilon": e, "delta": d}
            user_delta[rel] = user_level_delta(item_epsilon=e, item_delta=d, k=k)
        details["item_level"] = {"epsilon": item.epsilon, "delta": item.delta}  # the calibration target
        details["item_level_by_relation"] = pairs  # the certifying item-level pairs
        details["user_delta_by_relation"] = user_delta
        relation = acc.neighboring_relation
        privacy = PrivacyOutcome(
            epsilon=by_rel[relation],
            delta=details["user_delta_by_relation"][relation],
            privacy_unit="user",
            mechanism=(
                f"{name}: "
                + (f"phase 1 RR at eps1 = {eps1:.6g} on one example per user (truncated model), " if eps1 > 0 else "")
                + f"DP-SGD on all features over k = {k} examples per user at the item-level "
                f"({item.epsilon:.6g}, {item.delta:.3g}), user level by group privacy (002 Proposition 6)"
                + (", basic composition" if eps1 > 0 else "")
            ),
            accounting={**acc.to_dict(), "phase1_epsilon": eps1, "group_size": k},
            neighboring_relation=relation,
            epsilon_by_relation=by_rel,
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
        details=details,
    )
