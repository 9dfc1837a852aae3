"""Which benchmark episode a video shows: ledgers, their per-episode errors and the median / worst pick.

The episode is named, or picked as the ``median`` or ``worst`` of a ledger's per-episode position
errors (the figure the suite scored with ``pose_errors``: the surrogate's, or the identified
baseline's when no surrogate was evaluated; for ``rig-grasp`` among the acceptance sets' episodes).
The videos themselves: ``surrogate.bench.video``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import CaptureError, ConfigError
from ..paths import REPO_ROOT

WHICH = ("median", "worst")


def load_ledger(path) -> tuple[dict, Path]:
    """A ledger (``ledger.json`` or the report folder holding it) and its file path."""
    p = Path(path)
    if p.is_dir():
        p = p / "ledger.json"
    if not p.is_file():
        raise ConfigError("no ledger here (give a ledger.json or the --out folder of `surrogate bench`)", file=p)
    try:
        ledger = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"not a readable ledger ({e})", file=p) from None
    if not isinstance(ledger, dict) or not isinstance(ledger.get("models"), dict):
        what = f"a JSON {type(ledger).__name__}" if not isinstance(ledger, dict) else "an object without 'models'"
        raise ConfigError(f"not a ledger: {what}, expected the object `surrogate bench` writes (suite, models, ...)",
                          file=p)
    return ledger, p


def ranking_model(ledger: dict) -> str | None:
    """The model whose per-episode errors pick ``median`` / ``worst``: the surrogate, else the
    identified baseline, else the nominal one (the first evaluated with per-episode pose errors)."""
    for name in ("surrogate", "analytic_identified", "analytic_nominal"):
        m = ledger.get("models", {}).get(name) or {}
        if m.get("per_episode") and "pos_pct_size" in m["per_episode"][0]:
            return name
    return None


def ranked_episodes(ledger: dict) -> tuple[str, list[tuple[str, float]]]:
    """(model, [(episode key, mean position error % of size)] sorted by error, ascending).

    Keys are the ledger's per-episode ids (``set/id`` for ``rig-grasp``); for ``rig-grasp`` only
    the acceptance sets' episodes take part (those the verdict is about), when the ledger names them.
    """
    name = ranking_model(ledger)
    if name is None:
        raise ConfigError(f"ledger of suite {ledger.get('suite')!r} has no per-episode pose errors to pick an episode from "
                          "(models.*.per_episode); the policy suite is rendered from environment rollouts", key="models")
    rows = ledger["models"][name]["per_episode"]
    target = set((ledger.get("split") or {}).get("target_sets") or [])
    if target and all("set" in r for r in rows):
        rows = [r for r in rows if r["set"] in target] or rows
    pairs = [(str(r["id"]), float(r["pos_pct_size"])) for r in rows if r.get("pos_pct_size") is not None]
    return name, sorted(pairs, key=lambda x: (x[1], x[0]))


def pick_episode(ledger: dict, *, episode: str | None = None, which: str | None = None) -> dict:
    """The episode to render: named (``episode``) or ``median`` / ``worst`` by ``ranked_episodes``.

    Returns {"key", "which", "model", "pos_pct_size"} (the ledger's figure for that model and episode).
    The median of an even count is the lower middle episode (an episode, not an average of two).
    """
    if (episode is None) == (which is None):
        raise ConfigError("give exactly one of --episode ID and --which median|worst", key="episode")
    model, ranked = ranked_episodes(ledger)
    if not ranked:
        raise ConfigError(f"models.{model}.per_episode is empty", key=f"models.{model}.per_episode")
    if which is not None:
        if which not in WHICH:
            raise ConfigError(f"--which must be one of {WHICH}, got {which!r}", key="which")
        key, val = ranked[(len(ranked) - 1) // 2] if which == "median" else ranked[-1]
        return {"key": key, "which": which, "model": model, "pos_pct_size": val}
    keys = {k: v for k, v in ranked}
    every = {str(r["id"]): r.get("pos_pct_size") for r in ledger["models"][model]["per_episode"]}
    cands = [k for k in every if k == str(episode) or k.split("/", 1)[-1] == str(episode)]
    if len(cands) != 1:
        shown = ", ".join(list(every)[:8]) + (" ..." if len(every) > 8 else "")
        why = "is ambiguous (name the test set: SET/ID)" if cands else "is not one of its test episodes"
        raise ConfigError(f"episode {episode!r} {why}; the ledger's episodes (models.{model}.per_episode): {shown}",
                          key="episode")
    key = cands[0]
    return {"key": key, "which": None, "model": model, "pos_pct_size": keys.get(key, every[key])}


def resolve_checkpoint(path, *, ledger_file: Path | None = None, field_name: str = "models.surrogate.checkpoint") -> Path:
    """A checkpoint folder named in a ledger or on the command line: as given, else under the
    repository (ledgers record the path as it was typed, often relative to the checkout)."""
    p = Path(str(path))
    for cand in (p, REPO_ROOT / p):
        if (cand / "card.json").is_file():
            return cand
    raise ConfigError(f"checkpoint {str(path)!r} not found as given or under {REPO_ROOT} (no card.json); "
                      "pass --checkpoint", file=ledger_file, key=field_name if ledger_file else "checkpoint")


def dataset_path(ledger: dict, key: str, ledger_file) -> tuple[Path, str]:
    """(capture dataset holding the episode, its id within it) for a ledger episode key."""
    data = ledger.get("data") or {}
    sets = data.get("test_data") or {}
    if ledger.get("suite") == "rig-grasp" or ("path" not in sets and key.partition("/")[0] in sets):
        # episodes of named test sets (rig-grasp's, or several --test-data) are keyed SET/ID
        set_name, _, eid = key.partition("/")
        tds = (data.get("test_data") or {}).get(set_name) or {}
        if "path" not in tds:
            raise ConfigError(f"test set {set_name!r} of episode {key!r} has no path in the ledger", file=ledger_file,
                              key=f"data.test_data.{set_name}.path")
        return Path(tds["path"]), eid
    td = data.get("test_data")
    if isinstance(td, dict) and "path" in td:
        return Path(td["path"]), key
    if "path" not in data:
        raise ConfigError("the ledger names no dataset path", file=ledger_file, key="data.path")
    return Path(data["path"]), key


def find_episode(root: Path, eid: str, ledger_file, field_name: str):
    from ..capture import read_dataset

    if not (root / "meta" / "contact.json").is_file():
        raise ConfigError(f"dataset {root} (of episode {eid!r}) not found: it was there when the suite ran; "
                          "rerun `surrogate bench` or restore it", file=ledger_file, key=field_name)
    ds = read_dataset(root)
    for e in ds.episodes:
        if str(e.episode_id) == eid:
            return e, ds.meta
    raise CaptureError("no such episode in this dataset (the ledger names it)", file=root, episode=eid, field="episode_id")


def suite_ledger(suite: str, *, overrides=(), test_data=None, cache_dir=None, progress: bool = False) -> dict:
    """A minimal ledger for rendering a named episode of a suite without running it: the suite's
    config and where its test episodes are (no models: the analytic panel is nominal)."""
    from ..suites import load_suite
    from .run import CACHE_DIR

    cfg = load_suite(suite, overrides)
    cache_dir = Path(cache_dir or CACHE_DIR)
    name = Path(suite).stem if str(suite).endswith((".yaml", ".yml")) else str(suite)
    out = {"suite": cfg["suite"], "suite_name": name, "config": cfg, "models": {}, "split": {}}
    if cfg["suite"] == "cube-real":
        from .toss_data import load_tosses

        source = cfg["data"]["source"] if test_data is None else test_data  # a capture dataset or raw tosses
        out["data"] = {"path": str(load_tosses(source, cache_dir=cache_dir, progress=progress).root)}
    elif cfg["suite"] == "rig-grasp":
        from .rig_data import load_sets

        rig = {"config": cfg["data"].get("rig_config"), "overrides": cfg["data"].get("rig_overrides", []),
               "hand": cfg["data"].get("hand", "parallel_jaw"), "duration": cfg["data"].get("duration")}
        sets, _ = load_sets(cfg, test_data=test_data, rig=rig, cache_dir=cache_dir, workers=int(cfg.get("workers", 2)),
                             progress=progress)
        out["data"] = {"test_data": {n: {"path": str(ds.root)} for n, ds in sets.items()}}
        out["sets"] = {n: [str(e.episode_id) for e in ds.episodes] for n, ds in sets.items()}
    else:
        raise ConfigError(f"suite {suite!r} (kind {cfg['suite']!r}) has no recorded episodes; use --env", key="suite")
    return out


def suite_episode_key(ledger: dict, episode: str) -> str:
    """The ``SET/ID`` key of a bare ``rig-grasp`` episode id in a ``suite_ledger`` (ids are unique per set only)."""
    sets = ledger.get("sets")
    if not sets or "/" in str(episode):
        return str(episode)
    hits = [f"{n}/{episode}" for n, ids in sets.items() if str(episode) in ids]
    if len(hits) != 1:
        raise ConfigError(f"episode {episode!r} is {'in several test sets: ' + ', '.join(hits) if hits else 'in no test set'}"
                          f" of suite {ledger.get('suite_name')}; name it SET/ID", key="episode")
    return hits[0]


def policy_picks(ledger: dict) -> list[tuple[str, str, float]]:
    """(which, object, success-rate gap surrogate - analytic) of the policy suite's median and worst
    object (by the size of the gap; the median of an even count is the lower middle)."""
    ms = ledger.get("models") or {}
    s, a = (ms.get("surrogate") or {}).get("per_object") or {}, (ms.get("analytic_nominal") or {}).get("per_object") or {}
    return median_and_worst({o: s[o]["success_rate"] - a[o]["success_rate"] for o in s if o in a})


def median_and_worst(gaps: dict) -> list[tuple[str, str, float]]:
    """(which, name, gap) of the names of median and largest |gap| ({name: signed gap}; ties by name; the median of
    an even count is the lower middle); [] for no gaps. The one pick of the suites' median and worst videos."""
    ranked = sorted(((abs(g), k, g) for k, g in gaps.items()), key=lambda x: (x[0], x[1]))
    if not ranked:
        return []
    med, worst = ranked[(len(ranked) - 1) // 2], ranked[-1]
    return [("median", med[1], med[2]), ("worst", worst[1], worst[2])]
