"""One run of a method on ads data with binary labels (000 Table 7; 002's baselines).

User-level privacy (000 Section 6): the variant option ``examples_per_user = k`` caps every
training user at exactly k examples (:func:`labeldp.data.criteo_attribution.cap_examples_per_user`: k
sampled without replacement, users with fewer re-sampled with replacement), and ALL k labels of
a user together are the protected unit (``privacy_unit: "user"`` in the record):

* ``nonprivate``: the model on the true labels: of the capped data with ``examples_per_user``,
  else of every training row (the ``default`` variant: the table's non-private reference);
* ``rr``: randomized response at eps / k on each of the user's labels: by basic composition
  over the user's k labels (group privacy), eps-DP for the user's label vector;
* ``dpsgd``: per-user gradients (the sum over the user's k examples, clipped as one unit),
  Poisson sampling over users at rate q = n1 / U, sigma calibrated by the accountant for exactly
  the q and steps that run (:func:`labeldp.methods.private_training.account_run` with n = U).
  Changing one user's labels moves one clipped per-user gradient: label substitution at the user
  level (dp_accounting REPLACE_ONE); the record states eps under both relations.
* ``labeldp_pro``: the same, with the noisy gradient projected by AltConv onto the set of mean
  per-user gradients of an alternative batch of n2 users under every labelling (features only):
  :class:`labeldp.denoisers.UserSum`, k times the per-example (soft-label) set of the batch's
  rows with raw vertices. The alternative batch is drawn independently of the training batch,
  so amplification by subsampling holds as at the example level.

Without ``examples_per_user`` the unit is the example (002's example-level runs).
Metric: test AUC (``test_auc``) on the test split's rows.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from labeldp.accounting import label_events
from labeldp.methods.base import NON_PRIVATE, MethodResult, RunSpec, check_options, label_dp_outcome

__all__ = ["run_ads_method", "user_arrays", "ADS_OPTIONS"]

ADS_OPTIONS = ("examples_per_user",)
LABEL_STREAM = 1  # numpy.random.default_rng([seed, LABEL_STREAM, 7]) draws RR's label noise
CAP_STREAM = 3  # numpy.random.default_rng-style seed of the per-user cap


def _check_binary(data, method: str) -> None:
    if getattr(data, "kind", None) != "tabular" or getattr(data, "task", None) != "binary_classification":
        raise ValueError(
            f"{method} on tabular data needs a binary_classification dataset with users "
            f"(criteo_attribution, criteo_pctr); {getattr(data, 'name', '?')} is "
            f"{getattr(data, 'task', getattr(data, 'kind', '?'))}"
        )


def user_arrays(data, *, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every training user's k examples, shaped ``(U, k, ...)`` (x_num, x_cat, y)."""
    from labeldp.data.criteo_attribution import cap_examples_per_user

    if data.user_train is None:
        raise ValueError(
            f"{data.name} has no user ids (user_train); user-level privacy (examples_per_user) "
            "needs a dataset prepared with users, e.g. criteo_attribution"
        )
    idx = cap_examples_per_user(data.user_train, k=k, seed=seed * 1000 + CAP_STREAM)
    users = idx.size // k
    return (
        data.x_num_train[idx].reshape(users, k, -1),
        data.x_cat_train[idx].reshape(users, k, -1),
        np.asarray(data.y_train[idx], np.int32).reshape(users, k),
    )


def _build_model(data, y_for_bias: np.ndarray):
    from labeldp.ads.model import AdsMLP, embedding_dims, model_for

    cfg = model_for(data.name)
    sizes = tuple(data.cat_vocab_sizes)
    p = float(np.clip(np.mean(y_for_bias), 1e-4, 1 - 1e-4))
    # the logit's initial bias: log-odds of the labels trained on (already private for RR; for
    # DP-SGD the bias starts at 0 so that no unaccounted statistic of the labels is used)
    return cfg, AdsMLP(
        hidden=cfg.hidden,
        vocab_sizes=sizes,
        embed_dims=embedding_dims(sizes, rule=cfg.embedding),
        output_bias=math.log(p / (1 - p)),
    )


def _auc(model, params, data) -> float:
    from sklearn.metrics import roc_auc_score

    from labeldp.ads.train import predict_proba

    y = np.asarray(data.y_test, np.int32)
    if y.min() == y.max():
        raise ValueError(f"{data.name}: the test split has only one class; AUC is undefined (more test users)")
    return float(roc_auc_score(y, predict_proba(model, params, data.x_num_test, data.x_cat_test)))


def _user_denoiser(spec: RunSpec, k: int):
    """LabelDP-Pro's user-level AltConv (module docstring) and the alternative batch size in users."""
    from labeldp.denoisers import UserSum
    from labeldp.methods.pro_denoiser import make_denoiser_for

    opts = {o: v for o, v in spec.options.items() if o != "examples_per_user"}
    if opts.get("denoiser", "alt_conv") != "alt_conv":
        raise ValueError(
            f"user-level LabelDP-Pro implements the alt_conv denoiser only (variant {spec.variant!r} "
            f"asks for {opts['denoiser']!r}): SelfConv/SelfSpan break amplification"
        )
    for key, want in (("coefficient_set", "per_example"), ("vertices", "raw")):
        if opts.setdefault(key, want) != want:
            raise ValueError(
                f"user-level LabelDP-Pro projects onto sums of per-example sets: {key} must be "
                f"{want!r}, variant {spec.variant!r} sets {opts[key]!r}"
            )
    inner = make_denoiser_for(dataclasses.replace(spec, options=opts))
    n2 = int(opts.get("alt_batch_size") or spec.hparams["batch_size"])
    return UserSum(inner=inner, examples_per_user=k), n2


def _nonprivate_all_rows(data, spec: RunSpec) -> MethodResult:
    from labeldp.ads.train import AdsTrainConfig, train_on_labels

    hp = spec.hparams
    config = AdsTrainConfig(
        learning_rate=float(hp["learning_rate"]), epochs=int(hp["epochs"]), batch_size=int(hp["batch_size"])
    )
    y = np.asarray(data.y_train, np.int32)
    cfg, model = _build_model(data, y)
    t0 = time.perf_counter()
    res = train_on_labels(model, x_num=data.x_num_train, x_cat=data.x_cat_train, y=y, config=config, seed=spec.seed)
    seconds = time.perf_counter() - t0
    return MethodResult(
        metrics={
            "test_auc": _auc(model, res.params, data) if not res.diverged else float("nan"),
            "diverged": bool(res.diverged),
            "final_train_loss": res.final_loss,
            "steps": res.steps,
        },
        privacy=NON_PRIVATE,
        timings={"train_seconds": seconds, "seconds_per_step": seconds / max(res.steps, 1)},
        details={"rows": int(y.size), "examples_per_user": None, "model": cfg.to_dict()},
    )


def run_ads_method(data, spec: RunSpec, *, method: str) -> MethodResult:
    """Runs ``method`` (``nonprivate``, ``rr``, ``dpsgd``, ``labeldp_pro``) on binary ads data (module docstring).

    Args:
      data: a prepared binary_classification :class:`labeldp.data.tabular.PreparedTabular`.
      spec: the run; hparams ``learning_rate``, ``epochs``, ``batch_size`` (+ ``clip_norm`` for dpsgd).
      method: which method.

    Returns:
      A :class:`MethodResult` with ``test_auc`` and the privacy of what ran.
    """
    from labeldp.ads.train import AdsTrainConfig, train_on_labels, train_user_level

    _check_binary(data, method)
    held_out = sorted({"validation_fraction", "validation_epsilon"} & set(spec.options))
    if held_out:
        raise ValueError(
            f"{method} on {getattr(data, 'name', 'ads data')}: options {held_out} (held-out selection, "
            "labeldp.selection) are implemented for image data only; remove them from the variant"
        )
    if method == "labeldp_pro":  # the variant's denoiser options go to the user-level AltConv
        from labeldp.methods.pro_denoiser import OPTIONS as PRO_OPTIONS

        check_options(spec, ADS_OPTIONS + PRO_OPTIONS, method)
    else:
        check_options(spec, ADS_OPTIONS, method)
    k = spec.options.get("examples_per_user")
    if k is None and method == "nonprivate":
        return _nonprivate_all_rows(data, spec)
    if k is None:
        raise ValueError(
            f"{method} on {data.name}: only user-level runs (variant option examples_per_user, "
            "000 Table 7) are implemented so far; example-level ads runs (002) are not"
        )
    k = int(k)
    hp = spec.hparams
    config = AdsTrainConfig(
        learning_rate=float(hp["learning_rate"]), epochs=int(hp["epochs"]), batch_size=int(hp["batch_size"])
    )
    x_num, x_cat, y = user_arrays(data, k=k, seed=spec.seed)
    users = y.shape[0]
    details: dict[str, Any] = {"examples_per_user": k, "users": users, "privacy_unit": "user"}
    t0 = time.perf_counter()
    if method in ("nonprivate", "rr"):
        flat_y = y.reshape(-1)
        if method == "rr":
            from labeldp.mechanisms.user_level import rr_group_epsilon, user_randomized_response

            per_label = rr_group_epsilon(epsilon=spec.epsilon, k=k)
            flat_y = user_randomized_response(
                flat_y,
                np.repeat(np.arange(users), k),
                epsilon=spec.epsilon,
                k=k,
                num_classes=2,
                rng=np.random.default_rng([spec.seed, LABEL_STREAM, 7]),
            ).astype(np.int32)
            details.update(per_label_epsilon=per_label, label_noise_rate=float(np.mean(flat_y != y.reshape(-1))))
            privacy = label_dp_outcome(
                epsilon=spec.epsilon,
                mechanism=(
                    f"randomized_response at eps/k = {per_label:.6g} on each of a user's k = {k} labels "
                    "(group privacy: eps-DP for the user's label vector)"
                ),
                privacy_unit="user",
                event=label_events.per_user_label_event(
                    label_events.randomized_response_event(epsilon=per_label, num_classes=2), labels_per_user=k
                ),
            )
        else:
            privacy = dataclasses.replace(NON_PRIVATE, privacy_unit="user")
        cfg, model = _build_model(data, flat_y)
        res = train_on_labels(
            model,
            x_num=x_num.reshape(users * k, -1),
            x_cat=x_cat.reshape(users * k, -1),
            y=flat_y,
            config=config,
            seed=spec.seed,
        )
    elif method in ("dpsgd", "labeldp_pro"):
        from labeldp.methods.private_training import account_run

        if not spec.private:
            raise ValueError(f"dpsgd needs a finite epsilon, got {spec.epsilon}")
        run_acc = account_run(spec, n=users, amplification=bool(spec.options.get("amplification", True)))
        cfg, model = _build_model(data, np.array([0.5]))  # bias 0: no unaccounted label statistic
        denoiser, n2 = (None, 0) if method == "dpsgd" else _user_denoiser(spec, k)
        res = train_user_level(
            model,
            x_num=x_num,
            x_cat=x_cat,
            y=y,
            config=config,
            clip_norm=float(hp["clip_norm"]),
            plan=run_acc,
            seed=spec.seed,
            denoiser=denoiser,
            alt_batch_users=min(n2, users),
        )
        if denoiser is not None:
            details.update(
                denoiser=denoiser.name,
                alt_batch_users=min(n2, users),
                projection="k x the per-example soft-label set of the alternative batch's rows, raw vertices",
            )
        privacy = run_acc.privacy_outcome(
            mechanism=f"{method} with per-user gradients (k = {k} examples summed, clipped as one unit), Poisson "
            "sampling over users, Gaussian noise" + ("" if method == "dpsgd" else ", AltConv projection over users"),
            privacy_unit="user",
        )
        details.update(
            noise_multiplier=run_acc.noise_multiplier,
            sampling_rate=run_acc.sampling_rate,
            steps=run_acc.steps,
            accounting_seconds=run_acc.seconds,
            **res.details,
        )
    else:
        raise ValueError(f"no ads pipeline for method {method!r}")
    train_seconds = time.perf_counter() - t0
    auc = _auc(model, res.params, data) if not res.diverged else float("nan")
    details["model"] = cfg.to_dict()
    return MethodResult(
        metrics={
            "test_auc": auc,
            "diverged": bool(res.diverged),
            "final_train_loss": res.final_loss,
            "steps": res.steps,
        },
        privacy=privacy,
        timings={"train_seconds": train_seconds, "seconds_per_step": train_seconds / max(res.steps, 1)},
        details=details,
    )
