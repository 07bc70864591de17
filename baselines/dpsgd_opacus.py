"""DP-SGD through Opacus (PyTorch): the validation twin of ``dpsgd`` (000 Table 5 cross-check).

The same DP-SGD as :mod:`labeldp.methods.dpsgd`, run by the library most users would reach
for, on the PyTorch twin of the same 000 Table 10 model (:mod:`baselines.torch_models`):

* the SAME noise multiplier, sampling rate and number of steps: sigma is calibrated by this
  suite's accountant (:func:`labeldp.accounting.account_dpsgd`, PLD by default) for
  ``q = n1 / n`` and ``steps = floor(epochs * n / n1)``, and the batches are the SAME Poisson
  draws (:func:`labeldp.dpsgd.poisson_batches` with the same generator stream as ``dpsgd``);
* the SAME initial parameters when ``init: flax`` (the option; see below): the JAX engine's
  Flax initialisation for the seed (:func:`labeldp.methods.private_training.initial_params`)
  copied into the twin (:func:`baselines.torch_models.load_flax_params`); with ``init: torch``
  (the default) PyTorch's default initialisation;
* Opacus does the rest: per-example gradients (``GradSampleModule``, hooks), clipping to C,
  Gaussian noise ``N(0, sigma^2 C^2)`` on the sum and division by the expected batch size
  (``DPOptimizer``, ``loss_reduction="mean"``), plain SGD. On the first batch the run checks
  that Opacus' per-sample gradients sum to the batch gradient
  (:func:`check_per_sample_gradients`) and stops otherwise: records made before 2026-11-22
  20:20 UTC fed Opacus channels-last-strided inputs, got all-zero per-sample gradients for the
  second convolution and were deleted.

The record's epsilon is this suite's accounting of what ran (identical to ``dpsgd``'s);
``details`` adds what Opacus' own PRV and RDP accountants say for the same (sigma, q, steps),
so a reader sees both accountants agree. This is a validation column, not a paper cell.

Privacy: (eps, delta)-DP for the whole example (hence label-DP), as DP-SGD; an empty Poisson
batch still takes a noise-only step, as the accounting assumes.
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, PrivacyOutcome, RunSpec
from baselines import common

NAME = "dpsgd_opacus"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size", "clip_norm")
DATASET_KINDS = ("image",)
CALIBRATES_WITH_ACCOUNTANT = True  # the accountant calibrates sigma (spec.calibration_relation)
SAMPLED_BATCH_KEYS = ("batch_size",)  # the Poisson expected batch: at most the training units
OPTIONS = ("init",)
INITS = ("torch", "flax")


def opacus_epsilons(*, noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> dict[str, float]:
    """What Opacus' own accountants report for ``steps`` Poisson-subsampled Gaussian steps.

    Returns:
      ``{"prv": eps, "rdp": eps}`` (Opacus' PRV and RDP accountants at ``delta``).
    """
    from opacus.accountants import PRVAccountant, RDPAccountant

    out = {}
    for name, cls in (("prv", PRVAccountant), ("rdp", RDPAccountant)):
        acct = cls()
        acct.history = [(float(noise_multiplier), float(sampling_rate), int(steps))]
        out[name] = float(acct.get_epsilon(delta=float(delta)))
    return out


def check_per_sample_gradients(module, batch_size: int, *, rtol: float = 1e-3) -> float:
    """Checks that Opacus' per-sample gradients sum to the batch gradient.

    After ``loss.backward()`` on a mean-reduced loss, every parameter holds both the ordinary
    gradient ``p.grad`` (the batch mean, computed by autograd) and Opacus' per-sample gradients
    ``p.grad_sample``; their mean must be ``p.grad``. This catches per-sample gradients that are
    silently wrong (e.g. all zero for a layer: Opacus 1.6 with channels-last-strided inputs,
    see :func:`baselines.torch_models.nchw_tensor`), which would make the run a DP-SGD of a
    different model.

    Args:
      module: the ``GradSampleModule`` after ``backward``.
      batch_size: the number of examples in the batch.
      rtol: the largest allowed relative error per parameter.

    Returns:
      The largest relative error over the parameters.

    Raises:
      RuntimeError: naming the parameter whose per-sample gradients are wrong.
    """
    worst = 0.0
    for name, p in module.named_parameters():
        gs = getattr(p, "grad_sample", None)
        if p.grad is None or gs is None:
            raise RuntimeError(f"{NAME}: parameter {name} has no per-sample gradient from Opacus")
        ref = float(p.grad.norm())
        err = float((gs.sum(0) / batch_size - p.grad).norm()) / max(ref, 1e-12)
        if err > rtol:
            raise RuntimeError(
                f"{NAME}: Opacus' per-sample gradients of {name} do not sum to the batch gradient "
                f"(relative error {err:.3g}); the inputs must be a standard-strided NCHW tensor "
                "(baselines.torch_models.nchw_tensor)"
            )
        worst = max(worst, err)
    return worst


def build_twin(data, *, init: str, seed: int):
    """The PyTorch twin of the dataset's Table 10 model, initialised as ``init`` says.

    Args:
      data: a prepared image dataset (its name picks the model).
      init: ``torch`` (PyTorch's default initialisation after ``torch.manual_seed(seed)``) or
        ``flax`` (the JAX engine's initial parameters for ``seed``, copied in).
      seed: the run's seed.

    Returns:
      The ``torch.nn.Module``.
    """
    import torch

    from baselines.torch_models import build_torch_model, load_flax_params
    from labeldp.methods.common import build_model_for
    from labeldp.methods.private_training import initial_params

    if init not in INITS:
        raise ValueError(
            f"{NAME}: option init must be one of {INITS}, got {init!r}; set it in the config's variants.dpsgd_opacus"
        )
    torch.manual_seed(int(seed))
    model = build_torch_model(
        build_model_for(data).name, input_shape=tuple(data.x_train.shape[1:]), num_classes=int(data.num_classes)
    )
    if init == "flax":
        load_flax_params(model, initial_params(build_model_for(data), seed=int(seed))[1])
    return model


def run(data, spec: RunSpec) -> MethodResult:
    """Trains the Table 10 model with Opacus DP-SGD at this suite's sigma, q and steps.

    Args:
      data: a prepared image dataset.
      spec: the run (finite epsilon; hparams ``learning_rate``, ``epochs``, ``batch_size``,
        ``clip_norm``); option ``init``: ``torch`` (default: PyTorch's default initialisation,
        seeded by ``torch.manual_seed(seed)``) or ``flax`` (the JAX engine's initial parameters
        for the same seed).

    Returns:
      A :class:`MethodResult`; ``details`` has Opacus' PRV / RDP epsilons for the same run.
    """
    import time

    import numpy as np
    import torch
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    from baselines.torch_models import nchw_tensor
    from labeldp.dpsgd.loop import BATCH_STREAM
    from labeldp.methods.private_training import account_run
    from labeldp.training import to_float_images

    common.require_private(spec, NAME)
    common.check_options(spec, OPTIONS, NAME)
    init = spec.options.get("init", "torch")
    if spec.sampling != "poisson":
        raise ValueError(f"{NAME} runs Poisson sampling only (what the accountant assumes), got {spec.sampling!r}")
    hp = spec.hparams
    lr, n1, clip = float(hp["learning_rate"]), int(hp["batch_size"]), float(hp["clip_norm"])
    x_train = nchw_tensor(to_float_images(data.x_train))
    y_train = torch.from_numpy(np.asarray(data.y_train, np.int64))
    n = x_train.shape[0]
    run_acc = account_run(spec, n=n)  # the same calibration as the JAX engine
    acc, q, steps, sigma = run_acc.accounting, run_acc.sampling_rate, run_acc.steps, run_acc.noise_multiplier

    model = build_twin(data, init=init, seed=int(spec.seed))
    gsm = GradSampleModule(model, loss_reduction="mean")
    optimizer = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=lr),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        expected_batch_size=n1,
        loss_reduction="mean",
    )
    criterion = torch.nn.CrossEntropyLoss(reduction="mean")
    # the plan's batches from the JAX loop's stream (labeldp.dpsgd.loop): both engines see the same batches
    batches = run_acc.batches(rng=np.random.default_rng([spec.seed, BATCH_STREAM]), pad_to=n1)
    gsm.train()
    losses, empty, grad_check = [], 0, None
    t0 = time.perf_counter()
    for idx, mask in batches:
        real = torch.from_numpy(np.asarray(idx)[np.asarray(mask, bool)])
        optimizer.zero_grad(set_to_none=True)
        if real.numel() == 0:
            # noise-only step: the accountant counted this step whatever the batch held
            empty += 1
            for p in gsm.parameters():
                p.grad = torch.normal(0.0, sigma * clip, size=p.shape) / n1
            optimizer.original_optimizer.step()
            continue
        loss = criterion(gsm(x_train[real]), y_train[real])
        loss.backward()
        if grad_check is None:  # once, on the first real batch
            grad_check = check_per_sample_gradients(gsm, int(real.numel()))
        optimizer.step()
        losses.append(float(loss.detach()))
    train_seconds = time.perf_counter() - t0
    gsm.eval()
    correct = 0
    x_test = nchw_tensor(to_float_images(data.x_test))
    y_test = np.asarray(data.y_test)
    with torch.no_grad():
        for s in range(0, x_test.shape[0], 2048):
            pred = gsm(x_test[s : s + 2048]).argmax(dim=1).numpy()
            correct += int(np.sum(pred == y_test[s : s + 2048]))
    acc_pct = 100.0 * correct / len(y_test)
    audit = None
    if getattr(data, "audit_inputs", None) is not None:  # the label-canary audit (labeldp.audit)
        with torch.no_grad():
            audit = torch.log_softmax(gsm(nchw_tensor(to_float_images(data.audit_inputs))), dim=1).numpy()
    diverged = not all(np.isfinite(losses)) or not all(torch.isfinite(p).all() for p in model.parameters())
    privacy = PrivacyOutcome(
        epsilon=float(acc.epsilon),
        delta=float(acc.delta),
        valid=True,
        mechanism="dpsgd via Opacus (poisson batches, Gaussian noise; sigma from this suite's accountant)",
        accounting=acc.to_dict(),
        neighboring_relation=acc.neighboring_relation,
        epsilon_by_relation=dict(acc.epsilon_by_relation),
    )
    return MethodResult(
        metrics={
            "test_accuracy_pct": acc_pct,
            "diverged": bool(diverged),
            "final_train_loss": losses[-1] if losses else float("nan"),
            "steps": steps,
        },
        privacy=privacy,
        audit_log_probs=audit,
        timings={
            "train_seconds": train_seconds,
            "seconds_per_step": train_seconds / steps,
            "seconds_per_epoch": train_seconds * n / (steps * n1),
            "accounting_seconds": run_acc.seconds,
        },
        details={
            "noise_multiplier": sigma,
            "sampling_rate": q,
            "steps": steps,
            "empty_batches": empty,
            "init": init,
            "per_sample_gradient_max_rel_error": grad_check,
            "opacus_epsilon_relation": "add_or_remove",  # Opacus accountants: add/remove only
            "opacus_epsilon": opacus_epsilons(noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=spec.delta),
            "torch_threads": torch.get_num_threads(),
        },
    )
