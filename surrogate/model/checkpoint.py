"""Released checkpoints: ``weights.safetensors`` + ``card.json``; no pickle anywhere.

The card (JSON) holds: ``schema`` / ``schema_version``; ``features`` (feature-set version,
edge and node feature names, units used to nondimensionalize, and the normalization
statistics, which are also buffers in the weights); ``model`` (class and hyperparameters,
parameter count, FLOPs per contact); ``data`` (dataset name, root, sha256 prefix, train and
validation episode ids, margin, substeps, smoothing window); ``training`` (config,
wall time, metrics); ``versions`` (package versions). Loading a card of another schema
version, or with other feature definitions, fails with a message that says what differs.
The end-to-end peer (``gns.GNSNet``, ``GNS_CLASS``) has its own ``features`` section
(``gns.feature_card``: node and edge features, units L and frame period, input and target
normalizers) and a ``model.description``; its ``data`` adds the gravity it learned in L / frame^2.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..atomic import current_umask, write_json_atomic
from ..errors import SurrogateError
from . import gns
from . import graph as G
from .contact_law import ContactLawGNN, law_cost
from .gnn import ContactGNN, model_cost

GNS_CLASS = "surrogate.model.gns.GNSNet"  # the end-to-end peer: its own features (no contact graph)
# The model classes a card may name (the card's ``model.class``), with their cost function.
MODEL_CLASSES = {
    "surrogate.model.gnn.ContactGNN": (ContactGNN, model_cost),
    "surrogate.model.contact_law.ContactLawGNN": (ContactLawGNN, law_cost),
    GNS_CLASS: (gns.GNSNet, gns.gns_cost),
}
OUTPUTS = {
    ContactGNN: "per contact: F = f_n n + F_t (world), f_n = F0 softplus(o0), |F_t| < mu f_n, mu = mu_max sigmoid(o5)",
    ContactLawGNN: ("per contact: the passive law (surrogate.model.law) with k = k* F0/L^p exp(s_k tanh o_k), "
                    "c = c*/V exp(s_c tanh o_c), mu = mu* exp(s_mu tanh o_mu); forces solved semi-implicitly"),
}


def _class_name(model) -> str:
    return f"{type(model).__module__}.{type(model).__name__}"

def is_end_to_end(card: dict) -> bool:
    """True for a card of the end-to-end peer (it predicts whole steps, no MuJoCo), false for a contact model."""
    return (card.get("model") or {}).get("class") == GNS_CLASS


SCHEMA = "contact-surrogate-checkpoint"
SCHEMA_VERSION = "1.0"
WEIGHTS, CARD = "weights.safetensors", "card.json"


class CheckpointError(SurrogateError, ValueError):
    """A checkpoint that cannot be loaded by this version (names the file and what differs)."""


def _versions() -> dict:
    import lightning
    import mujoco
    import numpy
    import torch_geometric

    from .. import __version__
    return {"contact-surrogate": __version__, "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
            "lightning": lightning.__version__, "mujoco": mujoco.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}


def feature_card(model) -> dict:
    if isinstance(model, gns.GNSNet):
        return gns.feature_card(model)
    em, es = model.edge_norm.stats()
    nm, ns = model.node_norm.stats()
    return {
        "version": G.FEATURE_VERSION,
        "edge": list(G.EDGE_FEATURES), "node": list(G.NODE_FEATURES), "geom_descriptor": list(G.GEOM_DESC),
        "units": {"L": "object size (largest bounding-box side), m", "V": "sqrt(|g| L), m/s", "F0": "object mass * |g|, N"},
        "normalization": {"edge_mean": em.tolist(), "edge_std": es.tolist(), "node_mean": nm.tolist(), "node_std": ns.tolist(),
                          "samples": float(model.edge_norm.count)},
        "output": OUTPUTS[type(model)],
        **({"history": list(G.HISTORY_FEATURES)} if getattr(model, "history", False) is True else {}),
    }


def export_checkpoint(model, out_dir, *, data: dict | None = None, training: dict | None = None) -> Path:
    """Write ``out_dir/weights.safetensors`` and ``out_dir/card.json``; returns ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS), metadata={"schema": SCHEMA, "schema_version": SCHEMA_VERSION})
    os.chmod(out / WEIGHTS, 0o666 & ~current_umask())  # safetensors writes 0600; releases get the user's umask
    card = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "weights_sha256": _sha256(out / WEIGHTS),
        "features": feature_card(model),
        "model": {"class": _class_name(model), "hparams": dict(model.hparams), **MODEL_CLASSES[_class_name(model)][1](model),
                  **({"description": model.DESCRIPTION} if hasattr(model, "DESCRIPTION") else {})},
        "data": data or {}, "training": training or {}, "versions": _versions(),
    }
    write_json_atomic(out / CARD, card)
    return out


def read_card(path) -> dict:
    p = Path(path)
    p = p / CARD if p.is_dir() else p
    if not p.is_file():
        raise CheckpointError(f"{p}: no checkpoint card")
    try:
        card = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{p}: corrupt card ({e})") from None
    if card.get("schema") != SCHEMA:
        raise CheckpointError(f"{p}: not a {SCHEMA} card (schema={card.get('schema')!r})")
    if card.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointError(f"{p}: card schema version {card.get('schema_version')!r}; this version of the package "
                              f"reads {SCHEMA_VERSION!r}. Re-export the checkpoint or install the matching package version.")
    f = card.get("features", {})
    model = card.get("model") if isinstance(card.get("model"), dict) else {}
    if model.get("class") == GNS_CLASS:
        why = gns.feature_mismatch(f, model.get("hparams") if isinstance(model.get("hparams"), dict) else {})
        if why:
            raise CheckpointError(f"{p}: the card's feature definitions differ from this package's end-to-end peer "
                                  f"({why}); the weights would be fed the wrong inputs")
    elif f.get("version") != G.FEATURE_VERSION or f.get("edge") != list(G.EDGE_FEATURES) or f.get("node") != list(G.NODE_FEATURES):
        raise CheckpointError(f"{p}: the card's feature definitions (version {f.get('version')!r}) differ from this "
                              f"package's (version {G.FEATURE_VERSION}); the weights would be fed the wrong inputs")
    return card


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# Bounds of the hyperparameters a card may give, checked before the model is built (a card asking
# for ``hidden: 1e7`` would otherwise try to allocate hundreds of TB). Integer keys: [lo, hi].
INT_BOUNDS = {"hidden": (1, 4096), "steps": (1, 64), "mlp_layers": (1, 16)}
LAW_INT_BOUNDS = {"friction_iterations": (0, 32)}
GNS_INT_BOUNDS = {"history": (1, 16), "grid": (2, 8)}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_hparams(hp: dict, *, law: bool, card: Path, peer: bool = False) -> None:
    """Refuse hyperparameters of the wrong type or outside their bounds, naming the card and the key."""
    def bad(key, want):
        raise CheckpointError(f"{card}: model.hparams.{key} must be {want}, got {hp[key]!r}")

    for key, (lo, hi) in {**INT_BOUNDS, **(LAW_INT_BOUNDS if law else {}), **(GNS_INT_BOUNDS if peer else {})}.items():
        if key in hp and not (_is_int(hp[key]) and lo <= hp[key] <= hi):
            bad(key, f"an integer in [{lo}, {hi}]")
    if peer and "floor_clip" in hp and not (_is_number(hp["floor_clip"]) and 0 < hp["floor_clip"] <= 100):
        bad("floor_clip", "a number in (0, 100]")
    if not law:
        return
    if "bounds" in hp:
        b = hp["bounds"]
        if not (isinstance(b, (list, tuple)) and len(b) == 3 and all(_is_number(x) and 0 < x <= 10 for x in b)):
            bad("bounds", "3 positive numbers <= 10 (log-bounds of the corrections of k, c, mu)")
    if "mu_max" in hp and not (_is_number(hp["mu_max"]) and 0 < hp["mu_max"] <= 10):
        bad("mu_max", "a number in (0, 10]")
    for key in ("prior", "prior_body"):
        if hp.get(key) is not None and not isinstance(hp[key], dict):
            bad(key, "a mapping of the prior law's parameters")


def load_checkpoint(path):
    """(model in eval mode, card) from a checkpoint folder: a ``ContactGNN``, a ``ContactLawGNN`` or the
    end-to-end peer ``gns.GNSNet`` (``GNS_CLASS``; ``is_end_to_end(card)`` tells them apart).

    The weights must match the card's content hash (``weights_sha256``; cards written before it was
    recorded load without the check) and be finite: a flipped byte or a NaN is refused, naming the file.
    The card's hyperparameters are checked against their bounds (``INT_BOUNDS``, and for the law model
    ``bounds``, ``mu_max``, ``friction_iterations``, ``prior``/``prior_body``) before anything is built.
    """
    p = Path(path)
    card = read_card(p)
    name = card.get("model", {}).get("class", "surrogate.model.gnn.ContactGNN")
    if name not in MODEL_CLASSES:
        raise CheckpointError(f"{p / CARD}: unknown model class {name!r}; this package knows {sorted(MODEL_CLASSES)}")
    if not isinstance(card.get("model", {}).get("hparams"), dict):
        raise CheckpointError(f"{p / CARD}: model.hparams must be a mapping of the model's arguments")
    _check_hparams(card["model"]["hparams"], law=MODEL_CLASSES[name][0] is ContactLawGNN, card=p / CARD,
                   peer=name == GNS_CLASS)
    try:
        model = MODEL_CLASSES[name][0](**card["model"]["hparams"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{p / CARD}: model.hparams do not build a {name.rsplit('.', 1)[-1]}: {e}") from None
    if not (p / WEIGHTS).is_file():
        raise CheckpointError(f"{p / WEIGHTS}: no weights file")
    want = card.get("weights_sha256")
    if want is not None and _sha256(p / WEIGHTS) != want:
        raise CheckpointError(f"{p / WEIGHTS}: content hash differs from the card's weights_sha256 (corrupt or replaced weights)")
    try:
        state = load_file(str(p / WEIGHTS))
    except Exception as e:  # safetensors raises its own error types for truncated or garbled files
        raise CheckpointError(f"{p / WEIGHTS}: unreadable safetensors file ({e})") from None
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f"{p / WEIGHTS}: non-finite values in {bad[:4]}")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"{p / WEIGHTS}: weights do not match the card's model (missing {missing[:4]}, unexpected {unexpected[:4]})")
    model.eval()
    return model, card
