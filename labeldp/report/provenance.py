"""What a table header says of where its records came from (labeldp.report.render): the code revisions,
the frozen SimCLR encoder of a features dataset, and the pre-trained states the runs started from."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

__all__ = ["MAX_LISTED_REVISIONS", "revision_text", "revisions_text", "encoder_text", "pretrained_starts"]


def revision_text(git: Mapping[str, Any]) -> str:
    """A record's code revision as the table header names it: the commit, ``+dirty`` when the
    tree had changes, and the revision the caller stated where it was given too."""
    commit = str(git.get("commit"))
    text = commit + {True: "+dirty", None: " (tree state unknown)"}.get(git.get("dirty"), "")
    stated = git.get("stated")
    if stated:
        other = str(stated["commit"])
        if not (commit.startswith(other) or other.startswith(commit)):  # a short hash names the same commit
            text += f" (stated: {other}{'+dirty' if stated.get('dirty') else ''})"
    return text


def pretrained_starts(recs) -> str:
    """Which pre-trained states the records started from (labeldp.pretrained_init): name, data, test accuracy and
    the state's sha256 prefix, with how many records each; more than one per name means a cell may mix them."""
    counts = Counter()
    for r in recs:
        init = (r.get("details") or {}).get("init_from")
        if init:
            data = init.get("dataset") or {}
            acc = init.get("test_accuracy_pct")
            counts[
                f"{init.get('name')} ({data.get('name')}, {data.get('source')}, n_train={data.get('n_train')}, "
                f"{init.get('config', {}).get('epochs')} epochs, test accuracy "
                f"{'-' if acc is None else f'{acc:.1f}'}%, state {str(init.get('state_sha256'))[:12]})"
            ] += 1
    return "; ".join(f"{k}: {n} record{'s' if n != 1 else ''}" for k, n in sorted(counts.items()))


#: At most this many code revisions are listed one by one in a table header; more are summarised.
MAX_LISTED_REVISIONS = 6


def revisions_text(revisions: list[str]) -> str:
    """The header's "code revisions of the records": every distinct revision, or where there are more than
    :data:`MAX_LISTED_REVISIONS` (a protocol run over many sessions) their count and the three most used."""
    counts = Counter(revisions)
    if len(counts) <= MAX_LISTED_REVISIONS:
        return ", ".join(sorted(counts)) or "-"
    dirty = sum(1 for rev in counts if rev.endswith("+dirty"))
    top = ", ".join(
        f"{rev} ({n} record{'s' if n != 1 else ''})"
        for rev, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    )
    return (
        f"{len(counts)} revisions over {len(revisions)} records ({dirty} of them with uncommitted changes); "
        f"the most used: {top}; each record's environment.git names its own"
    )


def encoder_text(enc: Mapping[str, Any]) -> str:
    """One line on the frozen encoder of a features dataset (records' ``dataset.encoder``)."""
    pre = enc.get("pretrain") or {}
    cfg = pre.get("config") or {}
    probe = enc.get("linear_probe_test_accuracy_pct")
    return (
        f"SimCLR ResNet-18 (CIFAR stem, width {cfg.get('width', '?')}), {pre.get('epochs_completed', '?')} "
        f"pre-training epochs (000 D.2: 1,000), batch {cfg.get('batch_size', '?')}, final NT-Xent loss "
        f"{pre.get('final_loss', float('nan')):.3f}, on {pre.get('device', '?')}; representation dim "
        f"{enc.get('representation_dim', '?')}; non-private linear probe "
        + (f"{probe:.1f}%" if isinstance(probe, (int, float)) else "-")
        + " (000: 90.9% on CIFAR-10); encoder "
        f"sha256 {str(enc.get('sha256', '?'))[:12]}"
    )
