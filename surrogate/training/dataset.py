"""Before training: the capture dataset of ``data.root`` is there, or the error says which command makes it."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..paths import shared_data_dir

CAPTURE_MARKER = Path("meta") / "contact.json"  # every capture dataset has it (surrogate.capture.writer)
RIG_COMMAND = "surrogate rig generate --objects {split} --episodes {episodes} --workers 2 --seed {seed} --out {root}"


def rig_command(root: Path) -> str:
    """The rig's command for a dataset named like the release's (``rig_v3_wide``: ``train_wide``; ``rig_val_wide``:
    the decision grasps of ``val_wide``); any other rig dataset: grasps of the ``train`` split."""
    name = root.name.lower()
    if "val_wide" in name:
        return RIG_COMMAND.format(split="val_wide", episodes=240, seed=9006, root=root)
    if "wide" in name:
        return RIG_COMMAND.format(split="train_wide", episodes=240, seed=1, root=root)
    return RIG_COMMAND.format(split="train", episodes=300, seed=1, root=root)


def contactnets_command(root: Path) -> str:
    """The import of the real ContactNets cube tosses into ``root`` (from the shared data when it is here)."""
    src = shared_data_dir() / "contactnets_cube"
    where = str(src) if src.is_dir() else "<folder of N.pt | upstream archive | its URL>"
    return f"surrogate import contactnets {where} --out {root}"


def create_commands(root: Path, data: dict) -> list[str]:
    """The commands that write the dataset a config names: by its name (``contactnets_cube``, ``rig_*``) or the
    benchmark split it follows; all importers and the rig when neither says."""
    name = root.name.lower()
    suite = str((data.get("bench_split") or {}).get("suite", "")) if isinstance(data.get("bench_split"), dict) else ""
    if "contactnets" in name or "cube" in name or suite.startswith("cube-real"):
        return [contactnets_command(root)]
    if name.startswith("rig") or "grasp" in name:
        return [rig_command(root)]
    return [contactnets_command(root), f"surrogate import poses SRC --config POSES.yaml --out {root}",
            f"surrogate import lerobot SRC --mapping MAP.yaml --out {root}", rig_command(root)]


def not_a_dataset(root: Path) -> str | None:
    """None where ``root`` holds a capture dataset; else what it is instead, for the error that names it."""
    if (root / CAPTURE_MARKER).is_file():
        return None
    return "not found" if not root.exists() else f"is not a capture dataset (no {CAPTURE_MARKER})"


def require_dataset(cfg: dict) -> Path:
    """``data.root`` as a Path, if it holds a capture dataset; else a ConfigError naming the folder and the
    command(s) that create it."""
    data = cfg.get("data") or {}
    root = data.get("root")
    if not root:
        raise ConfigError("no capture dataset given: set data.root in the config or with --set data.root=DATASET",
                          key="data.root")
    root = Path(root)
    what = not_a_dataset(root)
    if what is None:
        return root
    cmds = create_commands(root, data)
    how = "create it with" if len(cmds) == 1 else "create one with one of"
    raise ConfigError(f"capture dataset {root} {what}; {how}:\n  " + "\n  ".join(cmds)
                      + "\n(or point data.root at another capture dataset: --set data.root=DATASET)", key="data.root")


def require_decision_data(cfg: dict) -> None:
    """``stages.closed_loop.decision_data``, where given, holds a capture dataset; else a ConfigError naming the
    folder and the command that creates it; one that is there is checked by ``setup.check_decision_data``."""
    from .setup import check_decision_data

    path = ((cfg.get("stages") or {}).get("closed_loop") or {}).get("decision_data")
    if not path:
        return
    what = not_a_dataset(Path(path))
    if what is None:
        check_decision_data(path, train_root=(cfg.get("data") or {}).get("root"))
        return
    raise ConfigError(f"decision dataset {path} {what}; create it with:\n  {rig_command(Path(path))}\n(or decide "
                      "on the validation replays: --set stages.closed_loop.decision_data=null)",
                      key="stages.closed_loop.decision_data")
