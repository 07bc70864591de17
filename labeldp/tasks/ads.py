"""Binary ads classification with users (000 Table 7; 002's baselines): the ads MLP, test AUC.

User-level privacy (000 Section 6): the variant option ``examples_per_user = k`` caps every training
user at exactly k examples (:func:`labeldp.data.sources.criteo_attribution.cap_examples_per_user`: k sampled
without replacement, users with fewer re-sampled with replacement), and ALL k labels of a user together
are the privacy unit (``privacy_unit: "user"`` in the record). Without it the unit is the example (one
row), and every training row is used.

* Training on targets: the dataset's ads MLP (:func:`labeldp.ads.model.model_for`) with RMSProp on the
  given labels (:func:`labeldp.ads.train.train_on_labels`), its logit's initial bias the log-odds of
  the labels trained on (already private for a label randomizer).
* DP training: per-unit gradients (the sum over a user's k examples, clipped as one unit), Poisson
  sampling over units at rate q = n1 / U, sigma calibrated by the accountant for exactly the q and steps
  that run (:func:`labeldp.methods.private_training.account_run` with n = U); the logit's bias starts at
  0 so that no unaccounted statistic of the labels is used. Changing one unit's labels moves one clipped
  per-unit gradient: label substitution at the unit level (dp_accounting REPLACE_ONE).
* LabelDP-Pro's denoiser is wrapped to project onto the set of mean per-user gradients of an alternative
  batch of n2 users under every labelling (features only): :class:`labeldp.denoisers.UserSum`, k times
  the per-example (soft-label) set of the batch's rows with raw vertices. The alternative batch is drawn
  independently of the training batch, so amplification by subsampling holds as at the example level.

Metric: test AUC (``test_auc``) on the test split's rows.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import numpy as np

from labeldp.ads.model import AdsMLP, embedding_dims, model_for
from labeldp.ads.train import AdsTrainConfig, predict_proba, train_on_labels, train_user_level
from labeldp.data.sources.criteo_attribution import cap_examples_per_user
from labeldp.denoisers import UserSum
from labeldp.methods.base import MethodResult, RunSpec, recipe_options_refused
from labeldp.methods.private_training import account_run
from labeldp.tasks.base import DenoiserFor, Trained, TrainingLabels

__all__ = ["AdsTask", "user_arrays", "user_denoiser", "ADS_OPTIONS", "CAP_STREAM"]

ADS_OPTIONS = ("examples_per_user",)
CAP_STREAM = 3  # the per-user cap's seed: seed * 1000 + CAP_STREAM
LABEL_STREAM_SUFFIX = 7  # label noise: numpy.random.default_rng([seed, stream, 7]) (000 Table 7's records)
_IMAGES_ONLY = "held-out selection (labeldp.selection) is implemented for image data only"


def user_arrays(data, *, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every training user's k examples, shaped ``(U, k, ...)`` (x_num, x_cat, y)."""
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


class AdsTask:
    """The binary ads task of one run (:class:`labeldp.tasks.base.Task`; module docstring)."""

    kind = "tabular"
    options = ADS_OPTIONS
    unsupported_options = {
        "validation_fraction": _IMAGES_ONLY,
        "validation_epsilon": _IMAGES_ONLY,
        "clipping_formulation": "per-user gradients are clipped as one unit by labeldp.ads.train",
        **recipe_options_refused(
            optimizer="the ads MLP trains with RMSProp at a constant rate (labeldp.ads.train)",
            network="the dataset's ads MLP (labeldp.ads.model.model_for)",
        ),
    }

    def __init__(self, data, spec: RunSpec):
        if getattr(data, "task", None) != "binary_classification":
            raise ValueError(
                f"{spec.method} on tabular data needs a binary_classification dataset with users "
                f"(criteo_attribution, criteo_pctr); {getattr(data, 'name', '?')} is {getattr(data, 'task', '?')}"
            )
        self.data = data
        self.spec = spec
        k = spec.options.get("examples_per_user")
        self.examples_per_user = None if k is None else int(k)

    @functools.cached_property
    def _units(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(x_num, x_cat, y)`` shaped ``(U, k, ...)``: capped users, or every row as a unit of one."""
        if self.examples_per_user is not None:
            return user_arrays(self.data, k=self.examples_per_user, seed=self.spec.seed)
        d = self.data
        n = d.y_train.shape[0]
        return (
            d.x_num_train.reshape(n, 1, -1),
            d.x_cat_train.reshape(n, 1, -1),
            np.asarray(d.y_train, np.int32)[:, None],
        )

    @property
    def privacy_unit(self) -> str:
        return "example" if self.examples_per_user is None else "user"

    def _unit_details(self) -> dict[str, Any]:
        units = self._units[2].shape[0]
        if self.examples_per_user is None:
            return {"rows": int(units), "examples_per_user": None, "privacy_unit": "example"}
        return {"examples_per_user": self.examples_per_user, "users": int(units), "privacy_unit": "user"}

    def training_labels(self) -> TrainingLabels:
        y = self._units[2]
        return TrainingLabels(
            labels=y.reshape(-1),
            unit_ids=np.repeat(np.arange(y.shape[0]), y.shape[1]),
            labels_per_unit=int(y.shape[1]),
            privacy_unit=self.privacy_unit,
            num_classes=2,
        )

    def label_entropy(self, stream: int) -> tuple[int, ...]:
        """The seed entropy of label-noise stream ``stream``: ``(seed, stream, 7)`` (the streams 000 Table 7's records used)."""
        return (int(self.spec.seed), int(stream), LABEL_STREAM_SUFFIX)

    def label_rng(self, stream: int) -> np.random.Generator:
        """``numpy.random.default_rng(label_entropy(stream))``."""
        return np.random.default_rng(list(self.label_entropy(stream)))

    def train_on_targets(self, targets: np.ndarray, *, desc: str, confusion: bool = False) -> Trained:
        """The ads MLP on ``targets`` (0/1, one per label of :meth:`training_labels`), test AUC."""
        y = np.asarray(targets)
        if y.ndim != 1 or y.shape[0] != self._units[2].size:
            raise ValueError(
                f"{desc}: the ads task trains on one 0/1 label per training label ({self._units[2].size}), "
                f"got targets of shape {y.shape} (soft targets are not implemented for ads data)"
            )
        y = y.astype(np.int32)
        cfg, model = self._model(y)
        x_num, x_cat, _ = self._units
        t0 = time.perf_counter()
        res = train_on_labels(
            model,
            x_num=x_num.reshape(y.size, -1),
            x_cat=x_cat.reshape(y.size, -1),
            y=y,
            config=self._config(),
            seed=self.spec.seed,
        )
        seconds = time.perf_counter() - t0
        return Trained(
            metrics=self._metrics(model, res),
            timings={"train_seconds": seconds, "seconds_per_step": seconds / max(res.steps, 1)},
            details={**self._unit_details(), "model": cfg.to_dict()},
        )

    def train_private(self, *, method: str, denoiser_for: DenoiserFor | None, desc: str) -> MethodResult:
        """DP-SGD (or LabelDP-Pro with ``denoiser_for``) over the units (module docstring)."""
        spec = self.spec
        if not spec.private:
            raise ValueError(f"{method} needs a finite epsilon, got {spec.epsilon}")
        x_num, x_cat, y = self._units
        units, k = y.shape
        run_acc = account_run(spec, n=units, amplification=bool(spec.options.get("amplification", True)))
        cfg, model = self._model(np.array([0.5]))  # bias 0: no unaccounted label statistic
        denoiser, n2 = (None, 0) if denoiser_for is None else user_denoiser(spec, denoiser_for, k=k)
        t0 = time.perf_counter()
        res = train_user_level(
            model,
            x_num=x_num,
            x_cat=x_cat,
            y=y,
            config=self._config(),
            clip_norm=float(spec.hparams["clip_norm"]),
            plan=run_acc,
            seed=spec.seed,
            denoiser=denoiser,
            alt_batch_users=min(n2, units),
        )
        seconds = time.perf_counter() - t0
        details: dict[str, Any] = self._unit_details()
        if denoiser is not None:
            details.update(
                denoiser=denoiser.name,
                alt_batch_users=min(n2, units),
                projection="k x the per-example soft-label set of the alternative batch's rows, raw vertices",
            )
        unit = "per-user gradients (k = {k} examples summed, clipped as one unit), Poisson sampling over users"
        if self.examples_per_user is None:
            unit = "per-example gradients, Poisson sampling over rows"
        privacy = run_acc.privacy_outcome(
            mechanism=f"{method} with {unit.format(k=k)}, Gaussian noise"
            + ("" if denoiser is None else ", AltConv projection over users"),
            privacy_unit=self.privacy_unit,
        )
        details.update(
            noise_multiplier=run_acc.noise_multiplier,
            sampling_rate=run_acc.sampling_rate,
            steps=run_acc.steps,
            accounting_seconds=run_acc.seconds,
            **res.details,
            model=cfg.to_dict(),
        )
        return MethodResult(
            metrics=self._metrics(model, res),
            privacy=privacy,
            timings={"train_seconds": seconds, "seconds_per_step": seconds / max(res.steps, 1)},
            details=details,
        )

    def vmap_key(self, *, denoiser_for: DenoiserFor | None) -> str | None:
        """None: the per-user ads path trains one run at a time."""
        return None

    # -- helpers ---------------------------------------------------------------------------------

    def _config(self):
        hp = self.spec.hparams
        return AdsTrainConfig(
            learning_rate=float(hp["learning_rate"]), epochs=int(hp["epochs"]), batch_size=int(hp["batch_size"])
        )

    def _model(self, y_for_bias: np.ndarray):
        cfg = model_for(self.data.name)
        sizes = tuple(self.data.cat_vocab_sizes)
        p = float(np.clip(np.mean(y_for_bias), 1e-4, 1 - 1e-4))
        return cfg, AdsMLP(
            hidden=cfg.hidden,
            vocab_sizes=sizes,
            embed_dims=embedding_dims(sizes, rule=cfg.embedding),
            output_bias=math.log(p / (1 - p)),
        )

    def _metrics(self, model, res) -> dict[str, Any]:
        return {
            "test_auc": self._auc(model, res.params) if not res.diverged else float("nan"),
            "diverged": bool(res.diverged),
            "final_train_loss": res.final_loss,
            "steps": res.steps,
        }

    def _auc(self, model, params) -> float:
        # sklearn only here: the planner imports this module (through the methods) for every
        # Snakefile parse, and sklearn would add about 0.4 s to each
        from sklearn.metrics import roc_auc_score

        data = self.data
        y = np.asarray(data.y_test, np.int32)
        if y.min() == y.max():
            raise ValueError(f"{data.name}: the test split has only one class; AUC is undefined (more test users)")
        return float(roc_auc_score(y, predict_proba(model, params, data.x_num_test, data.x_cat_test)))


def user_denoiser(spec: RunSpec, denoiser_for: DenoiserFor, *, k: int):
    """LabelDP-Pro's user-level AltConv (module docstring) and the alternative batch size n2 in users.

    Args:
      spec: the run (its variant's denoiser options; ``examples_per_user`` is the task's).
      denoiser_for: the method's per-example denoiser for a spec (:func:`labeldp.methods.pro_denoiser.make_denoiser_for`).
      k: examples per user.

    Returns:
      ``(UserSum(inner, k), n2)``.

    Raises:
      ValueError: a denoiser other than AltConv, or projection options that contradict the per-user sum.
    """
    opts = {o: v for o, v in spec.options.items() if o not in ADS_OPTIONS}
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
    inner = denoiser_for(dataclasses.replace(spec, options=opts))
    n2 = int(opts.get("alt_batch_size") or spec.hparams["batch_size"])
    return UserSum(inner=inner, examples_per_user=k), n2
