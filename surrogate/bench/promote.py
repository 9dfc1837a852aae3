"""A trained checkpoint becomes a release by a benchmark's paired rule: ``surrogate release CANDIDATE --ledger
LEDGER --row ROW --out DIR``.

The rule is the one training keeps a network by on its decision grasps (``metrics.replacement_refusals``): in one
suite run, the candidate's row minus the suite's ``surrogate`` row (the release it would replace), paired per test
episode and resampled by the suite's unit (``paired_minus_surrogate``), has a 95 % interval below zero at the
verdict's horizon, the one over the whole episode does not lie above zero, and at least 10 objects carry it.
Anything else refuses, printing the intervals. The release goes to a new folder only: replacing a published release
is the maintainers' commit, never a command. Its card is the candidate's, plus a ``release`` block naming the ledger,
the rows it compared, the intervals and the ablation rows of its training (and of ``--ablation-from`` runs on the
same validation episodes). With ``--seed-row ROW`` (repeatable), other seeds of the candidate's recipe scored in the
same run must be kept by the rule too: a gain that one seed shows and another does not is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..atomic import atomic_directory, write_json_atomic
from ..errors import ConfigError, OutputError
from ..metrics import replacement_refusals, signed_interval
from ..paths import portable_path

RULE = ("the candidate minus the suite's surrogate row (the release), paired per test episode, resampled by the "
        "suite's unit (metrics.replacement_refusals): the 95 % interval of the position error at the verdict's "
        "horizon lies below zero, the one over the whole episode does not lie above zero, at least 10 objects")


def decide(ledger: dict, row: str, *, file=None) -> dict:
    """The rule on one ledger: {"kept": bool, "reasons": [str], "paired": the row's ``paired_minus_surrogate``}.
    A ledger without the row or without its paired differences is refused, naming what it has."""
    models = ledger.get("models") if isinstance(ledger, dict) else None
    if not isinstance(models, dict) or not isinstance(models.get(row, {}), dict):
        raise ConfigError(f"not a benchmark ledger: its models must map row names to rows, got "
                          f"{type(models if isinstance(ledger, dict) else ledger).__name__}"
                          + (f" (row {row!r} is a {type(models.get(row)).__name__})" if isinstance(models, dict)
                             else ""),
                          file=file, key="models")
    if row not in models or row == "surrogate":
        learned = sorted(k for k, v in models.items() if isinstance(v, dict) and v.get("checkpoint") and k != "surrogate")
        raise ConfigError(f"no learned row {row!r} to compare with the release; the ledger's learned rows: {learned}",
                          file=file, key="models")
    paired = models[row].get("paired_minus_surrogate") or {}
    at, whole = paired.get("pos_pct_at_horizon") or {}, paired.get("pos_pct_size") or {}
    if not at.get("ci95") or whole.get("mean") is None:
        raise ConfigError(f"row {row!r} has no paired difference against the surrogate row (a suite run with "
                          f"surrogate.rows and per-episode scores writes it)", file=file, key=f"models.{row}")
    reasons = replacement_refusals(at, whole, units=_objects(ledger, row, paired.get("horizon_s"), at))
    return {"kept": not reasons, "reasons": reasons, "paired": paired}


def _objects(ledger: dict, row: str, horizon_s, at: dict) -> int:
    """How many objects carry the row's paired difference at the horizon: its test episodes of the suite's target
    sets that reach the horizon (a ledger without per-episode rows: the difference's own units or episodes)."""
    eps = ledger["models"][row].get("per_episode")
    if not eps:
        return int(at.get("units", at.get("n", 0)))
    sets, h = set((ledger.get("split") or {}).get("target_sets") or []), f"{float(horizon_s or 1.0):g}"
    return len({r.get("object") for r in eps if (not sets or r.get("set") in sets)
                and (r.get("horizon_pos_pct_size") or {}).get(h) is not None})


def _same_model(card: dict, row: dict) -> bool:
    """Is the ledger row's model the candidate? By the weights' hash where the ledger recorded it, else by the
    card's model and training sections (what the ledgers written before the hash hold)."""
    seen = row.get("card") or {}
    if seen.get("weights_sha256"):
        return seen["weights_sha256"] == card.get("weights_sha256")
    return all(json.dumps(seen.get(k), sort_keys=True) == json.dumps(card.get(k), sort_keys=True)
               for k in ("model", "training"))


def _ablation(card: dict, extra: list) -> list[dict]:
    """The training's ablation rows (law, network ...) of the candidate and of each ``extra`` card trained on the
    same validation episodes, each row once."""
    rows = list((card.get("training") or {}).get("metrics", {}).get("ablation") or [])
    val = (card.get("data") or {}).get("val_episodes")
    for other_path, other in extra:
        if (other.get("data") or {}).get("val_episodes") != val:
            raise ConfigError("trained on other validation episodes than the candidate; its ablation rows would not "
                              "pair with the candidate's", file=Path(other_path) / "card.json", key="data.val_episodes")
        names = {r.get("row") for r in rows}
        rows += [r for r in other["training"]["metrics"].get("ablation") or [] if r.get("row") not in names]
    return rows


def _seeds(ledger: dict, card: dict, row: str, seed_rows, *, file) -> dict:
    """{row: paired difference} of other seeds of the candidate's recipe scored in the same run, each of which the
    rule must keep too: a gain that one seed shows and another does not is not released (a ConfigError says which)."""
    out = {}
    for s in seed_rows:
        if s == row:
            raise ConfigError(f"seed row {s!r} is the candidate's own row", file=file, key=f"models.{s}")
        d = decide(ledger, s, file=file)
        if _same_model(card, ledger["models"][s]):
            raise ConfigError(f"seed row {s!r} scored the candidate's own weights, not another seed", file=file,
                              key=f"models.{s}.card.weights_sha256")
        seen = (ledger["models"][s].get("card") or {}).get("model") or {}
        if seen and card.get("model") and seen.get("hparams") != card["model"].get("hparams"):
            raise ConfigError(f"row {s!r} is not a seed of the candidate's recipe (its model's hparams differ)",
                              file=file, key=f"models.{s}.card.model")
        if not d["kept"]:
            raise ConfigError(f"not released: another seed of its recipe, row {s!r}, is not kept by the rule "
                              f"({'; '.join(d['reasons'])})", file=file, key=f"models.{s}.paired_minus_surrogate")
        out[s] = d["paired"]
    return out


def promote(candidate, ledger_path, *, row: str, out, ablation_from=(), seed_rows=()) -> dict:
    """Write the release folder ``out`` (new or empty) from ``candidate`` if ``decide`` keeps it, and keeps each of
    ``seed_rows`` (other seeds of its recipe in the same ledger); returns the card's ``release`` block. Refuses
    (nothing written) a candidate whose weights the ledger did not score as ``row``."""
    from ..model.checkpoint import CARD, WEIGHTS, load_checkpoint  # torch: only when a release is made

    candidate, ledger_path, out = Path(candidate), Path(ledger_path), Path(out)
    _, card = load_checkpoint(candidate)  # the weights' hash and ranges checked
    try:
        ledger = json.loads(ledger_path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"unreadable ledger ({e})", file=ledger_path) from None
    decision = decide(ledger, row, file=ledger_path)
    models = ledger["models"]
    if not _same_model(card, models[row]):
        raise ConfigError(f"row {row!r} scored another model than {candidate} (its card differs)", file=ledger_path,
                          key=f"models.{row}.card")
    if not decision["kept"]:
        raise ConfigError(f"not released: {'; '.join(decision['reasons'])} (the rule: {RULE})", file=ledger_path,
                          key=f"models.{row}.paired_minus_surrogate")
    seeds = _seeds(ledger, card, row, seed_rows, file=ledger_path)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError("exists and is not empty: a release is written to a new folder, never over another",
                          file=out)
    extra = [(p, load_checkpoint(p)[1]) for p in ablation_from]
    block = {"rule": RULE, "ledger": portable_path(ledger_path), "suite": ledger.get("suite_name"),
             "created": ledger.get("created"), "config_hash": ledger.get("config_hash"), "row": row,
             "training_decided": ((card.get("training") or {}).get("metrics", {}).get("release") or {}).get("structure"),
             "replaces": {"checkpoint": models["surrogate"].get("checkpoint"),
                          "weights_sha256": (models["surrogate"].get("card") or {}).get("weights_sha256")},
             "test_data": (ledger.get("data") or {}).get("test_data"),
             "paired_minus_release": decision["paired"], "seed_rows": seeds,
             "rows": {name: _summary(m, decision["paired"].get("horizon_s")) for name, m in models.items()
                      if isinstance(m, dict) and m.get("overall")},
             "ablation": _ablation(card, extra)}
    with atomic_directory(out, overwrite=out.exists()) as tmp:
        shutil.copyfile(candidate / WEIGHTS, tmp / WEIGHTS)
        write_json_atomic(tmp / CARD, {**card, "release": block})
    load_checkpoint(out)  # what was written loads, hash and all
    return block


def _summary(model: dict, horizon_s) -> dict:
    """A ledger row's means: position % of size at the horizon and over the episode, pad force (object weights)."""
    o = model["overall"]
    at = ((o.get("horizons") or {}).get("pos_pct_size") or {}).get(f"{float(horizon_s):g}") or {}
    return {"pos_pct_at_horizon": at.get("mean"), "pos_pct_size": (o.get("pos_pct_size") or {}).get("mean"),
            "pad_force_weights": (o.get("pad_force_weights") or {}).get("mean"), "episodes": o.get("episodes")}


def build_parser(c) -> None:
    c.add_argument("candidate", help="the trained checkpoint folder (e.g. runs/NAME/network)")
    c.add_argument("--ledger", required=True, help="a suite's ledger.json that scored it as a row beside the release")
    c.add_argument("--row", required=True, help="the candidate's row in the ledger (its surrogate.rows name)")
    c.add_argument("--out", required=True, help="the release folder to write (new or empty)")
    c.add_argument("--ablation-from", action="append", default=[], metavar="CKPT",
                   help="a checkpoint trained on the same validation episodes whose ablation rows the card adds")
    c.add_argument("--seed-row", action="append", default=[], metavar="ROW",
                   help="another seed of the candidate's recipe in the same ledger: the rule must keep it too")


def run(a) -> None:
    block = promote(a.candidate, a.ledger, row=a.row, out=a.out, ablation_from=a.ablation_from, seed_rows=a.seed_row)
    p = block["paired_minus_release"]
    for key, what in (("pos_pct_at_horizon", f"position % of size at {p.get('horizon_s')} s"),
                      ("pos_pct_size", "position % of size over the episode"),
                      ("pad_force_weights", "pad force, object weights")):
        d = p.get(key) or {}
        if d.get("ci95"):
            print(f"{what}: {signed_interval(d['mean'], d['ci95'])} against the release")
    print(f"released to {a.out} (its card's release block names the ledger and the rows)")
