"""Non-private reference: ordinary training on the true labels (000 Table 5 header; for 003's
regression data, the Appendix G MLP with RMSProp on the true labels).

No privacy: the record's epsilon is ``inf``. This is the accuracy the paper states beside
Table 5 and the ``epsilon = inf`` row of Table 7.
"""

from __future__ import annotations

from labeldp.methods.base import NON_PRIVATE, MethodResult, RunSpec

NAME = "nonprivate"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "tabular", "features")


def run(data, spec: RunSpec) -> MethodResult:
    """Trains the dataset's Table 10 model on the true labels and evaluates test accuracy.

    Args:
      data: a :class:`labeldp.data.prepare.PreparedData`.
      spec: the run (``epsilon`` must be ``inf``).

    Returns:
      A :class:`MethodResult` with ``test_accuracy_pct``.
    """
    from labeldp.methods.common import build_model_for, train_and_evaluate
    from labeldp.training import one_hot

    if spec.private:
        raise ValueError(f"nonprivate runs take epsilon=inf, got {spec.epsilon}")
    if getattr(data, "task", None) == "binary_classification":  # ads data (000 Table 7): labeldp.ads
        from labeldp.ads.pipeline import run_ads_method

        return run_ads_method(data, spec, method=NAME)
    if getattr(data, "kind", "image") == "tabular":  # 003's regression: the MLP on the true labels
        from labeldp.regression.pipeline import Randomized, run_label_randomizer

        def identity(labels, *, data, spec, rng):
            return Randomized(
                noisy_labels=labels, privacy=NON_PRIVATE, details={"epsilon1": 0.0, "epsilon2": None, "mesh_size": None}
            )

        return run_label_randomizer(data, spec, identity, name=NAME)
    model = build_model_for(data)
    weights = one_hot(data.y_train, data.num_classes)
    metrics, timings, audit = train_and_evaluate(model, data, weights, spec, desc="nonprivate")
    return MethodResult(metrics=metrics, privacy=NON_PRIVATE, timings=timings, audit_log_probs=audit)
