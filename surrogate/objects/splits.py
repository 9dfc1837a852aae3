"""Named object splits from YAML (default ``configs/objects/splits.yaml``).

Format (see the default file for a commented example)::

    splits:
      <name>:
        families: [box, ...]      # procedural: one object per family and seed
        seeds: [start, stop]      # half-open range of non-negative integers
        description: ...          # optional
      <name>:
        folder: ${SURROGATE_DATA}/ycb_sample/ycb   # URDFs + unreferenced meshes
    disjoint_families:            # optional: groups of splits sharing no family
      - [train, heldout]
    anchors: ...                  # optional: holds YAML anchors, ignored

``${VAR}`` in paths expands environment variables; ``SURROGATE_DATA``
defaults to ``<repo>/../shared/data`` (the shared data folder next to the
checkout). Relative paths are relative to the YAML file's folder.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml

from surrogate.config import expand_env, parse_yaml
from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset
from surrogate.objects.families import FAMILIES, make_object
from surrogate.objects.folder import load_object_folder
from surrogate.paths import CONFIG_DIR, shared_data_dir

DEFAULT_CONFIG = CONFIG_DIR / "objects" / "splits.yaml"
_SPLIT_KEYS = ("families", "seeds", "folder", "description")
_TOP_KEYS = ("splits", "disjoint_families", "anchors")  # anchors: YAML anchor holders, ignored


def data_root() -> Path:
    """The shared data folder: ``$SURROGATE_DATA``, else ``<repo>/../shared/data``."""
    return shared_data_dir().resolve()


@dataclass(frozen=True)
class SplitSpec:
    """One split as configured.

    Attributes:
      name: split name.
      families: procedural families (empty for a folder split).
      seeds: (start, stop) half-open seed range, or None.
      folder: resolved folder of URDF/mesh files, or None.
      description: free text.
    """

    name: str
    families: tuple[str, ...] = ()
    seeds: tuple[int, int] | None = None
    folder: Path | None = None
    description: str = ""

    @property
    def procedural_count(self) -> int | None:
        """How many objects ``load_split`` makes of it without building them (one per family and seed); None for a
        folder split."""
        return None if self.seeds is None else (self.seeds[1] - self.seeds[0]) * len(self.families)


def _expand(value: str, *, file, key) -> str:
    return expand_env(value, file=file, key=key)


def _read_config(config_path) -> tuple[Path, dict]:
    path = Path(config_path) if config_path is not None else DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError("split config file does not exist", file=path)
    try:
        data = parse_yaml(path.read_text())  # the config files' one parser (1e5: a float)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", file=path) from exc
    if not isinstance(data, dict) or not isinstance(data.get("splits"), dict) or not data["splits"]:
        raise ConfigError("expected a mapping with a non-empty 'splits' mapping", file=path, key="splits")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {unknown}; allowed: {list(_TOP_KEYS)}", file=path, key=unknown[0])
    return path, data


def _parse_split(name: str, entry, path: Path) -> SplitSpec:
    key = f"splits.{name}"
    if not isinstance(entry, dict):
        raise ConfigError(f"must be a mapping with keys {list(_SPLIT_KEYS)}", file=path, key=key)
    unknown = sorted(set(entry) - set(_SPLIT_KEYS))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown}; allowed: {list(_SPLIT_KEYS)}", file=path, key=f"{key}.{unknown[0]}")
    has_proc = "families" in entry or "seeds" in entry
    if has_proc == ("folder" in entry):
        raise ConfigError("give either 'families' with 'seeds', or 'folder'", file=path, key=key)

    if "folder" in entry:
        if not isinstance(entry["folder"], str):
            raise ConfigError("folder must be a path string", file=path, key=f"{key}.folder")
        folder = Path(_expand(entry["folder"], file=path, key=f"{key}.folder"))
        if not folder.is_absolute():
            folder = path.parent / folder
        return SplitSpec(name, folder=folder, description=str(entry.get("description", "")))

    fams = entry.get("families")
    if not isinstance(fams, list) or not fams or not all(isinstance(f, str) for f in fams):
        raise ConfigError(f"families must be a non-empty list; allowed: {sorted(FAMILIES)}", file=path, key=f"{key}.families")
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        raise ConfigError(f"unknown families {bad}; allowed: {sorted(FAMILIES)}", file=path, key=f"{key}.families")
    if len(set(fams)) != len(fams):
        raise ConfigError("families are listed twice", file=path, key=f"{key}.families")
    seeds = entry.get("seeds")
    if (
        not isinstance(seeds, list)
        or len(seeds) != 2
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or not 0 <= seeds[0] < seeds[1]
    ):
        raise ConfigError(
            f"seeds must be [start, stop] with 0 <= start < stop (half-open range), got {seeds!r}",
            file=path,
            key=f"{key}.seeds",
        )
    return SplitSpec(name, families=tuple(fams), seeds=(seeds[0], seeds[1]), description=str(entry.get("description", "")))


def _check_disjoint(specs: dict[str, SplitSpec], groups, path: Path) -> None:
    if groups is None:
        return
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        raise ConfigError("must be a list of lists of split names", file=path, key="disjoint_families")
    for g in groups:
        for n in g:
            if n not in specs:
                raise ConfigError(f"unknown split {n!r}; splits: {sorted(specs)}", file=path, key="disjoint_families")
        for i, a in enumerate(g):
            for b in g[i + 1 :]:
                shared = sorted(set(specs[a].families) & set(specs[b].families))
                if shared:
                    raise ConfigError(
                        f"splits '{a}' and '{b}' must not share families, but both have {shared}",
                        file=path,
                        key="disjoint_families",
                    )


def load_split_specs(config_path: str | Path | None = None) -> dict[str, SplitSpec]:
    """Every split of the config, validated (families known, seeds valid, disjointness held)."""
    path, data = _read_config(config_path)
    specs = {str(name): _parse_split(str(name), entry, path) for name, entry in data["splits"].items()}
    _check_disjoint(specs, data.get("disjoint_families"), path)
    return specs


def split_names(config_path: str | Path | None = None) -> list[str]:
    """Names of the configured splits, in file order."""
    return list(load_split_specs(config_path))


def split_spec(name: str, config_path: str | Path | None = None) -> SplitSpec:
    """The configuration of one split. Raises ConfigError listing the split names."""
    specs = load_split_specs(config_path)
    if name not in specs:
        raise ConfigError(f"unknown split {name!r}; allowed: {list(specs)}", file=config_path or DEFAULT_CONFIG, key="splits")
    return specs[name]


def load_split(name: str, config_path: str | Path | None = None) -> list[ObjectAsset]:
    """The objects of a split: family-major, seed-minor for procedural splits; sorted by path for folders.

    Files a folder split cannot load are skipped with one warning listing them.

    Raises:
      ConfigError: unknown split or bad config, or a folder that does not exist.
    """
    spec = split_spec(name, config_path)
    if spec.folder is not None:
        if not spec.folder.is_dir():
            raise ConfigError(
                f"folder {spec.folder} does not exist (set SURROGATE_DATA to the shared data folder)",
                file=config_path or DEFAULT_CONFIG,
                key=f"splits.{name}.folder",
            )
        objects, skipped = load_object_folder(spec.folder)
        if skipped:
            warnings.warn(
                f"split '{name}': skipped {len(skipped)} file(s): " + "; ".join(f"{p}: {r}" for p, r in skipped),
                stacklevel=2,
            )
        return objects
    start, stop = spec.seeds
    return [make_object(f, s) for f in spec.families for s in range(start, stop)]
