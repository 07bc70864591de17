"""001 Figure 2: how accurate the private k-means histogram priors of 001 Algorithm 4 are.

001 Appendix (SSL priors), as its Figure 2 measures them: k-means with C clusters on the features
of the training AND the test examples together (features are public under label DP); each
cluster's label histogram over its TRAINING examples released by the discrete Laplace mechanism at
eps (:func:`labeldp.mechanisms.classification.discrete_laplace_histogram`, parameter eps / 2);
every test example predicted as its cluster's noisy-histogram argmax (a cluster with no positive
noisy count: the uniform prior, whose argmax is class 0). The metric, ``test_accuracy_pct``, is
the test accuracy of that prediction. No model is trained.

Privacy: the release is the C x K noisy histograms: changing one training label moves one row by
+1 in one class and -1 in another (L1 sensitivity 2), so noise with parameter eps / 2 makes it
(eps, 0)-label-DP under label substitution (001 Algorithm 4); the clustering reads features only,
and the test labels are read only to score.

Variant options: ``num_clusters`` (C, required: one variant per curve of the figure),
``kmeans_n_init`` (default 1) and ``kmeans_max_iter`` (default 300). Label randomness:
``numpy.random.default_rng([spec.seed, 6])``; k-means' ``random_state`` is the seed.
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec, check_options
from baselines import common

NAME = "kmeans_histogram_prior"
HYPERPARAMETERS: tuple[str, ...] = ()
DATASET_KINDS = ("features",)  # SimCLR representations of an image dataset (labeldp.feature_datasets)
OPTIONS = ("num_clusters", "kmeans_n_init", "kmeans_max_iter")
STREAM = 6  # the histogram noise's generator: [seed, STREAM]

MECHANISM = (
    "discrete_laplace_histograms (k-means clusters of train + test features; pure eps-label-DP, L1 sensitivity 2)"
)


def run(data, spec: RunSpec) -> MethodResult:
    """Clusters, releases the noisy histograms and scores their argmax on the test set.

    Args:
      data: a features dataset (``x_train``, ``y_train``, ``x_test``, ``y_test``, ``num_classes``).
      spec: the run (finite ``epsilon``: the histograms' budget; options as the module docstring).

    Returns:
      A :class:`MethodResult` with ``test_accuracy_pct``; ``details`` has C, the clusters holding
      training examples and the share of test examples in clusters without any.
    """
    import time

    import numpy as np
    from sklearn.cluster import KMeans

    from labeldp.accounting import label_events
    from labeldp.mechanisms.classification import discrete_laplace_histogram

    eps = common.require_private(spec, NAME)
    check_options(spec, OPTIONS, NAME)
    if "num_clusters" not in spec.options:
        raise ValueError(f"{NAME} needs the variant option num_clusters (C of 001 Figure 2): add it to the variant")
    x_tr, x_te = np.asarray(data.x_train, np.float64), np.asarray(data.x_test, np.float64)
    x = np.concatenate([x_tr.reshape(len(x_tr), -1), x_te.reshape(len(x_te), -1)])
    c = int(spec.options["num_clusters"])
    if not 1 <= c <= len(x):
        raise ValueError(f"{NAME}: num_clusters {c} must be in [1, {len(x)}] (train + test examples)")
    t0 = time.perf_counter()
    km = KMeans(
        n_clusters=c,
        random_state=int(spec.seed),
        n_init=int(spec.options.get("kmeans_n_init", 1)),
        max_iter=int(spec.options.get("kmeans_max_iter", 300)),
    )
    ids = km.fit_predict(x).astype(np.int64)
    ids_tr, ids_te = ids[: len(x_tr)], ids[len(x_tr) :]
    k = int(data.num_classes)
    counts = np.zeros((c, k), dtype=np.int64)
    np.add.at(counts, (ids_tr, np.asarray(data.y_train, np.int64)), 1)
    release = discrete_laplace_histogram(counts, epsilon=eps, rng=np.random.default_rng([int(spec.seed), STREAM]))
    predicted = np.argmax(release.priors[ids_te], axis=1)
    seconds = time.perf_counter() - t0
    with_train = counts.sum(axis=1) > 0
    return MethodResult(
        metrics={
            "test_accuracy_pct": float(100.0 * np.mean(predicted == np.asarray(data.y_test))),
            "diverged": False,
        },
        privacy=common.pure_label_dp(eps, MECHANISM, event=label_events.pure_epsilon_event(epsilon=eps)),
        timings={"train_seconds": seconds},
        details={
            "num_clusters": c,
            "clusters_with_training_examples": int(with_train.sum()),
            "test_share_in_clusters_without_training_examples": float(np.mean(~with_train[ids_te])),
            "label_rng": [int(spec.seed), STREAM],
        },
    )
