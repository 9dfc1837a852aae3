"""An ensemble of trained networks on one law: ``surrogate ensemble MEMBER MEMBER ... --out DIR``.

Networks trained by one recipe from different seeds disagree: on rig grasps one run's network was below its law on
480 held-out objects and a rerun's was not (docs/contact-model.md). Averaging their corrections is the standard cure
for that variance. The members must share the law (every prior parameter, tensor for tensor: they were trained on
top of it) and the network's architecture; the ensemble is one ``ContactLawGNN`` with ``members`` = K whose
log-corrections are the members' mean (``ContactLawGNN.law_parameters``), so it stays inside the same bounds, as
passive as each member, and runs wherever a checkpoint runs (the stepper's compiled path evaluates every member).
The stepper's input-range check and the card's normalization section are the first member's (members trained on
one dataset saw the same feature ranges).

The ensemble is a candidate like any trained network: score it beside the release (``surrogate.rows`` of a suite)
and release it by the paired rule (``surrogate release``). Members trained on other episodes are refused, so the
card's data section is every member's; it names every member (folder and weights hash). A release under
``checkpoints/`` is never its ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from ..errors import ConfigError
from ..paths import is_release
from .contact_law import ContactLawGNN


def ensemble(models: list[ContactLawGNN], *, names: list[str] | None = None) -> ContactLawGNN:
    """One ``ContactLawGNN`` (eval mode) whose K networks are copies of ``models``' (each trained, one network each,
    the same hyperparameters and the same law); ``names`` (default ``member i``) name them in errors."""
    names = names or [f"member {i}" for i in range(len(models))]
    if len(models) < 2:
        raise ConfigError(f"an ensemble needs at least 2 members, got {len(models)}")
    first = models[0]
    for name, m in zip(names, models):
        if not isinstance(m, ContactLawGNN) or not m.corrections or m.extra:
            raise ConfigError(f"{name}: not a law with one network of corrections (a law alone, an ensemble or the "
                              f"end-to-end peer cannot be a member)")
        if m.hparams != first.hparams:
            diff = sorted(k for k in {*m.hparams, *first.hparams} if m.hparams.get(k) != first.hparams.get(k))
            raise ConfigError(f"{name}: its law or architecture differs from {names[0]}'s in model.hparams {diff}; "
                              f"members must be trained on the same law with the same network")
        for p, q in zip(m.prior_parameters(), first.prior_parameters()):
            if not torch.equal(p, q):
                raise ConfigError(f"{name}: its law's parameters differ from {names[0]}'s (not the same law)")
    out = ContactLawGNN(**first.hparams, members=len(models))
    missing, unexpected = out.load_state_dict(first.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("extra.") for k in missing)  # the others' weights come next
    for extra, m in zip(out.extra, models[1:]):
        extra.load_state_dict(m.state_dict())
    return out.eval()


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse, before any work, an ``--out`` that is a release (``paths.is_release``: never replaced) or an existing
    folder without ``--overwrite`` (it had been replaced without a word, a shipped release included)."""
    if is_release(out):
        raise ConfigError(f"{out} is a release (checkpoints/{out.name}): an ensemble never replaces one; write it to "
                          "a new folder and release it by the paired rule (surrogate release)", key="out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"{out} exists: pass --overwrite to replace the checkpoint there, or choose a new folder",
                          key="out")


def _same_data(loaded: list, names: list) -> dict:
    """The members' one training-data section: members trained on other data are refused (the card names one
    training set, which the benchmarks check against their test sets; a member trained on the test families would
    have gone unnamed)."""
    first = loaded[0][1].get("data") or {}
    for name, (_, card) in zip(names[1:], loaded[1:]):
        data = card.get("data") or {}
        if data.get("sha256") != first.get("sha256") or data.get("train_episodes") != first.get("train_episodes"):
            raise ConfigError(f"{name} was trained on {data.get('name')!r} (sha256 {str(data.get('sha256'))[:12]}, "
                              f"{len(data.get('train_episodes') or [])} training episodes), {names[0]} on "
                              f"{first.get('name')!r} (sha256 {str(first.get('sha256'))[:12]}, "
                              f"{len(first.get('train_episodes') or [])}): members are trained on the same episodes")
    return first


def run(a: argparse.Namespace) -> None:
    from ..paths import portable_path
    from .checkpoint import export_checkpoint, load_checkpoint

    _check_out(Path(a.out), bool(getattr(a, "overwrite", False)))
    loaded = [load_checkpoint(p) for p in a.members]
    hashes = [c.get("weights_sha256") for _, c in loaded]
    if len(set(hashes)) < len(hashes):
        raise ConfigError(f"members with the same weights (weights_sha256): {list(a.members)}; an ensemble of copies is "
                          f"its one network")
    model = ensemble([m for m, _ in loaded], names=list(a.members))
    data = _same_data(loaded, list(a.members))
    training = {"ensemble_of": [{"checkpoint": portable_path(p), "weights_sha256": c.get("weights_sha256")}
                                for p, (_, c) in zip(a.members, loaded)]}
    out = export_checkpoint(model, a.out, data=data, training=training)
    print(f"{out}: an ensemble of {len(loaded)} networks on one law (corrections averaged)")
