"""Released checkpoints: ``weights.safetensors`` + ``card.json``; no pickle anywhere.

The card (JSON) holds: ``schema`` / ``schema_version``; ``features`` (feature-set version,
edge and node feature names, units used to nondimensionalize, and the normalization
statistics, which are also buffers in the weights); ``model`` (class and hyperparameters,
parameter count, FLOPs per contact); ``data`` (dataset name, root, sha256 prefix, train and
validation episode ids, margin, substeps, smoothing window); ``training`` (config,
wall time, metrics); ``versions`` (package versions). Loading a card of another schema
version, or with other feature definitions, fails with a message that says what differs.
The end-to-end peer (``surrogate.baselines.gns.GNSNet``, ``GNS_CLASS``; a baseline outside this package, which
registers its class here when imported: ``register_peer``) has its own ``features`` section (node and edge
features, units L and frame period, input and target normalizers) and a ``model.description``; its ``data`` adds
the gravity it learned in L / frame^2. Cards written before it moved name ``surrogate.model.gns.GNSNet``: an
alias of the same class (``END_TO_END``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..atomic import atomic_directory, current_umask, pid_lock, strict_json, write_json_atomic
from ..errors import ForeignOutputError, SurrogateError
from ..paths import file_sha256
from . import graph as G
from . import law_ranges
from .contact_law import ContactLawGNN
from .layers import count_parameters, mlp_flops

GNS_CLASS = "surrogate.baselines.gns.GNSNet"  # the end-to-end peer: its own features (no contact graph)
END_TO_END = (GNS_CLASS, "surrogate.model.gns.GNSNet")  # its class, and the name its cards had before it moved
V1_CLASS = "surrogate.model.gnn.ContactGNN"  # contact model v1 (raw forces), removed: its cards are refused


def law_cost(model: ContactLawGNN, *, nodes_per_contact: float = 0.5) -> dict:
    """Parameter count and multiply-add FLOPs per contact of the networks (the law's solve is ~1k FLOPs on top)."""
    if not model.corrections:
        return {"parameters": count_parameters(model), "flops_per_contact": 1000, "edge_flops": 1000, "node_flops": 0}
    k = len(model.members)  # an ensemble runs each member's network
    edge = k * (mlp_flops(model.stiffness_mlp) + mlp_flops(model.edge_enc) + mlp_flops(model.decoder) +
                sum(mlp_flops(layer.edge_mlp) for layer in model.layers)) + 1000
    node = k * (mlp_flops(model.node_enc) + sum(mlp_flops(layer.node_mlp) for layer in model.layers
                                                if layer.node_mlp is not None))
    return {"parameters": count_parameters(model), "flops_per_contact": int(edge + nodes_per_contact * node),
            "edge_flops": int(edge), "node_flops": int(node)}


# The model classes a card may name (the card's ``model.class``), with their cost function.
MODEL_CLASSES = {
    "surrogate.model.contact_law.ContactLawGNN": (ContactLawGNN, law_cost),
}
PEER_FEATURES: dict = {}  # END_TO_END class name -> (feature_card(model), feature_mismatch(features, hparams))


def register_peer(cls, cost, feature_card, feature_mismatch) -> None:
    """Make the end-to-end peer's checkpoints (``END_TO_END``, both names) export and load; called by
    ``surrogate.baselines.gns`` when it is imported."""
    for name in END_TO_END:
        MODEL_CLASSES[name] = (cls, cost)
        PEER_FEATURES[name] = (feature_card, feature_mismatch)
OUTPUTS = {
    ContactLawGNN: ("per contact: the passive law (surrogate.model.law) with k = k* F0/L^p exp(s_k tanh o_k), "
                    "c = c*/V exp(s_c tanh o_c), mu = mu* exp(s_mu tanh o_mu); forces solved semi-implicitly"),
}


def _class_name(model) -> str:
    return f"{type(model).__module__}.{type(model).__name__}"

def is_end_to_end(card: dict) -> bool:
    """True for a card of the end-to-end peer (it predicts whole steps, no MuJoCo), false for a contact model."""
    return (card.get("model") or {}).get("class") in END_TO_END


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
    if _class_name(model) in PEER_FEATURES:
        return PEER_FEATURES[_class_name(model)][0](model)
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
    """Write ``out_dir/weights.safetensors`` and ``out_dir/card.json``; returns ``out_dir``.

    Atomic and locked: built in a temporary folder beside ``out_dir`` and swapped into place
    (``atomic.atomic_directory``), under ``<out_dir>.lock`` (``atomic.pid_lock``), so that a kill at any point
    leaves the old export or the new one, and a second writer is refused. An existing ``out_dir`` is replaced
    only if it holds nothing but a checkpoint (or nothing). A law outside its physical ranges is refused."""
    out = Path(out_dir)
    if isinstance(model, ContactLawGNN):  # never export an absurd law (it would be refused when loaded)
        law_ranges.check_model(model, where=f"{out}: the law to export")
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with pid_lock(out), atomic_directory(out, overwrite=True, replaceable=check_export_folder) as tmp:
        # one metadata key: safetensors writes a metadata map in hash order, which changes from process to process,
        # so two keys made the same weights hash differently (the card has the schema and its version anyway)
        save_file(state, str(tmp / WEIGHTS), metadata={"schema": f"{SCHEMA} {SCHEMA_VERSION}"})
        os.chmod(tmp / WEIGHTS, 0o666 & ~current_umask())  # safetensors writes 0600; releases get the user's umask
        card = {
            "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
            "weights_sha256": file_sha256(tmp / WEIGHTS),
            "features": feature_card(model),
            "model": {"class": _class_name(model), "hparams": dict(model.hparams),
                      **MODEL_CLASSES[_class_name(model)][1](model),
                      **({"description": model.DESCRIPTION} if hasattr(model, "DESCRIPTION") else {})},
            "data": data or {}, "training": training or {}, "versions": _versions(),
        }
        card["model_sha256"] = model_sha256(json.loads(json.dumps(strict_json(card))))  # as read back
        write_json_atomic(tmp / CARD, card)
    return out


def model_sha256(card: dict) -> str:
    """sha256 of a card's ``model`` and ``features`` sections (canonical JSON): what builds the model and feeds it,
    which ``weights_sha256`` does not cover (an edited ``model.hparams.bounds`` had loaded as another model)."""
    text = json.dumps({k: card.get(k) for k in ("model", "features")}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_export_folder(path: Path) -> None:
    """An export replaces a folder holding a checkpoint (or nothing), never other files: ForeignOutputError."""
    if not path.is_dir() or path.is_symlink():
        raise ForeignOutputError("not a folder: cannot export a checkpoint there", file=path)
    other = sorted(p.name for p in path.iterdir() if p.name not in (WEIGHTS, CARD))
    if other:
        raise ForeignOutputError(f"holds other files than a checkpoint ({other[:4]}); exporting would replace "
                                 f"them: export to another folder, or move them away", file=path)


def read_card(path) -> dict:
    p = Path(path)
    p = p / CARD if p.is_dir() else p
    if not p.is_file():
        raise CheckpointError(f"{p}: no checkpoint card")
    try:
        card = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{p}: corrupt card ({e})") from None
    if not isinstance(card, dict):  # a list or a number: its fields below would be an AttributeError
        raise CheckpointError(f"{p}: corrupt card (a JSON {type(card).__name__}, not an object)")
    for key in ("features", "model", "data", "training"):
        if key in card and card[key] is not None and not isinstance(card[key], dict):
            raise CheckpointError(f"{p}: corrupt card ({key} is a {type(card[key]).__name__}, not a mapping)")
    if card.get("schema") != SCHEMA:
        raise CheckpointError(f"{p}: not a {SCHEMA} card (schema={card.get('schema')!r})")
    if card.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointError(f"{p}: card schema version {card.get('schema_version')!r}; this version of the package "
                              f"reads {SCHEMA_VERSION!r}. Re-export the checkpoint or install the matching package version.")
    f = card.get("features", {})
    model = card.get("model") if isinstance(card.get("model"), dict) else {}
    if model.get("class") in END_TO_END:
        if model["class"] not in PEER_FEATURES:
            raise CheckpointError(f"{p}: the end-to-end peer (a baseline, no contact model): import "
                                  f"surrogate.baselines.gns first (it registers its checkpoints), or score it with "
                                  f"surrogate bench cube-real")
        hp = model.get("hparams") if isinstance(model.get("hparams"), dict) else {}
        why = PEER_FEATURES[model["class"]][1](f, hp)
        if why:
            raise CheckpointError(f"{p}: the card's feature definitions differ from this package's end-to-end peer "
                                  f"({why}); the weights would be fed the wrong inputs")
    elif f.get("version") != G.FEATURE_VERSION or f.get("edge") != list(G.EDGE_FEATURES) or f.get("node") != list(G.NODE_FEATURES):
        raise CheckpointError(f"{p}: the card's feature definitions differ from this package's ({feature_diff(f)}); "
                              f"the weights would be fed the wrong inputs")
    return card


def feature_diff(f: dict) -> str:
    """What a card's contact features (``features``) differ in from this package's: the version, and per list
    (edge, node) the names only one side has, or the order."""
    out = []
    if f.get("version") != G.FEATURE_VERSION:
        out.append(f"version {f.get('version')!r} against {G.FEATURE_VERSION!r}")
    for key, ours in (("edge", list(G.EDGE_FEATURES)), ("node", list(G.NODE_FEATURES))):
        theirs = f.get(key)
        if theirs == ours:
            continue
        if not isinstance(theirs, list):
            out.append(f"{key} features {theirs!r}, not a list of names")
            continue
        only_card = [n for n in theirs if n not in ours]
        only_here = [n for n in ours if n not in theirs]
        parts = ([f"only in the card {only_card}"] if only_card else []) + \
                ([f"only in this package {only_here}"] if only_here else [])
        out.append(f"{key} features: " + ("; ".join(parts) if parts else "the same names in another order"))
    return "; ".join(out)


# Bounds of the hyperparameters a card may give, checked before the model is built (a card asking
# for ``hidden: 1e7`` would otherwise try to allocate hundreds of TB). Integer keys: [lo, hi].
INT_BOUNDS = {"hidden": (1, 4096), "steps": (1, 64), "mlp_layers": (1, 16)}
LAW_INT_BOUNDS = {"friction_iterations": (0, 32), "members": (1, 16)}
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
    if "presliding_bound" in hp and not (_is_number(hp["presliding_bound"]) and 0 < hp["presliding_bound"] <= 10):
        bad("presliding_bound", "a number in (0, 10] (the log-bound of the presliding spring's correction)")
    for key in ("prior", "prior_body"):
        if hp.get(key) is not None and not isinstance(hp[key], dict):
            bad(key, "a mapping of the prior law's parameters")


def load_checkpoint(path):
    """(model in eval mode, card) from a checkpoint folder: a ``ContactLawGNN`` or the end-to-end peer
    (``END_TO_END``, registered by ``surrogate.baselines.gns``; ``is_end_to_end(card)`` tells them apart). A v1
    card (``V1_CLASS``) is refused.

    The weights must match the card's content hash (``weights_sha256``: a card without it is refused, since
    deleting the key had switched the check off) and be finite: a flipped byte or a NaN is refused, naming the file.
    The card's hyperparameters are checked against their bounds (``INT_BOUNDS``, and for the law model
    ``bounds``, ``mu_max``, ``friction_iterations``, ``prior``/``prior_body``) before anything is built.
    """
    p = Path(path)
    card = read_card(p)
    name = card.get("model", {}).get("class", V1_CLASS)  # v1 cards were written before the class was recorded
    if name == V1_CLASS:
        raise CheckpointError(f"{p / CARD}: a v1 raw-force checkpoint (ContactGNN), no longer supported; retrain it as "
                              f"contact model v2 (surrogate train with model.kind: law, e.g. --config cube_tosses)")
    if name not in MODEL_CLASSES:
        raise CheckpointError(f"{p / CARD}: unknown model class {name!r}; this package knows {sorted(MODEL_CLASSES)}")
    if not isinstance(card.get("model", {}).get("hparams"), dict):
        raise CheckpointError(f"{p / CARD}: model.hparams must be a mapping of the model's arguments")
    _check_hparams(card["model"]["hparams"], law=MODEL_CLASSES[name][0] is ContactLawGNN, card=p / CARD,
                   peer=name in END_TO_END)
    try:
        model = MODEL_CLASSES[name][0](**card["model"]["hparams"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{p / CARD}: model.hparams do not build a {name.rsplit('.', 1)[-1]}: {e}") from None
    if not (p / WEIGHTS).is_file():
        raise CheckpointError(f"{p / WEIGHTS}: no weights file")
    want = card.get("weights_sha256")
    if not isinstance(want, str):  # every export writes it: a card without it had switched the check off
        raise CheckpointError(f"{p / CARD}: no weights_sha256 (every exported card has the weights' content hash)")
    if file_sha256(p / WEIGHTS) != want:
        raise CheckpointError(f"{p / WEIGHTS}: content hash differs from the card's weights_sha256 (corrupt or replaced weights)")
    try:
        state = load_file(str(p / WEIGHTS))
    except Exception as e:  # safetensors raises its own error types for truncated or garbled files
        raise CheckpointError(f"{p / WEIGHTS}: unreadable safetensors file ({e})") from None
    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f"{p / WEIGHTS}: non-finite values in {bad[:4]}")
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a tensor of another shape than the card's model (hparams edited): torch's message
        raise CheckpointError(f"{p / WEIGHTS}: weights do not match the card's model ({str(e).splitlines()[-1].strip()})"
                              ) from None
    if missing or unexpected:
        raise CheckpointError(f"{p / WEIGHTS}: weights do not match the card's model (missing {missing[:4]}, unexpected {unexpected[:4]})")
    model.eval()
    if isinstance(model, ContactLawGNN):
        _check_law(model, card["model"]["hparams"], p / CARD)
        model.contact_groups = _contact_groups(card, p / CARD)  # what the law assumes: the stepper checks it
    # last: an edit that every check above lets through (a valid value, another model than the one trained)
    if card.get("model_sha256") is not None and model_sha256(card) != card["model_sha256"]:
        raise CheckpointError(f"{p / CARD}: its model or features section differs from the card's model_sha256 (edited "
                              "after the export): the weights would be built or fed otherwise than they were trained")
    return model, card


def _contact_groups(card: dict, path: Path) -> dict | None:
    """The card's ``data.contact_groups`` ({group: {"trained": bool, "against", "units", ...}}; None on cards written
    before it was stated), checked for shape, naming the field."""
    groups = (card.get("data") or {}).get("contact_groups")
    if groups is None:
        return None
    if not isinstance(groups, dict) or not all(isinstance(groups.get(g), dict) and isinstance(groups[g].get("trained"), bool)
                                               for g in groups) or not set(groups) <= {"surface", "body"}:
        raise CheckpointError(f"{path}: data.contact_groups must map surface / body to {{trained: true|false, against, "
                              f"units}}, got {groups!r}")
    return groups


def _check_law(model: ContactLawGNN, hp: dict, card: Path) -> None:
    """Refuse a law out of its physical ranges (``law_ranges``) or a card whose prior disagrees with the weights."""
    try:
        law_ranges.check_model(model, where=f"{card}: model.hparams (as the weights hold them)")
    except law_ranges.LawRangeError as e:
        raise CheckpointError(str(e)) from None
    for group, key in (("surface", "prior"), ("body", "prior_body")):
        if isinstance(hp.get(key), dict):
            diff = law_ranges.mismatch(hp[key], model.prior(group).to_json())
            if diff:
                raise CheckpointError(f"{card}: model.hparams.{key} disagrees with the weights ({'; '.join(diff)}); "
                                      f"the card does not describe this law")
