"""YAML configs: loading, ``KEY=VALUE`` overrides with dotted keys, checked lookups, and the one
config hash (``config_hash``: the rig's datasets, resume manifests and caches, and the ledgers)."""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import yaml

from .errors import ConfigError

SET_SOURCE = "command line (--set)"  # where a KEY=VALUE override came from, as errors name it

# YAML 1.1 (PyYAML) reads an exponent only after a dot and with a sign: ``1e5`` and ``1.0e5`` were strings (only
# ``1.0e+5`` a float), which a range check then refused as "outside its physical range". Everyone types 1e5, so any
# number with an exponent is a float, as in YAML 1.2; nothing else changes: ``0x1e5`` stays hex, ``1e`` and ``e5``
# strings, ``1_0e5`` a string (1.1's underscores are not 1.2's), every other float and int as before.
# an exponent of at most three digits: a digit string with an "e" in it (an id, a short hash) long enough to
# overflow stays a string rather than becoming inf; quote such a value in YAML all the same
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]{1,3}$")


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key given twice in one YAML mapping (``YamlLoader``)."""


class YamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads ``1e5``, ``-2E-3``, ``+3e+2``, ``1.0e5`` as floats (``EXPONENT_FLOAT``), and
    refuses a key given twice in one mapping (YAML's loaders keep the last without a word: ``data.root`` twice in a
    file, or ``{epochs: 1, epochs: 5}`` in a ``--set``, ran with whichever came last). A merge (``<<: *base``) may
    still override the keys it brings: only the mapping's own keys are compared."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeLoader's own error names it
                break
            if duplicate:
                raise DuplicateKeyError(None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class YamlDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes the string '1e5', so that ``YamlLoader`` reads it back as a string."""


for _cls in (YamlLoader, YamlDumper):  # add_implicit_resolver copies the resolvers first: SafeLoader is untouched
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+.0123456789"))


def parse_yaml(text: str):
    """``text`` parsed as ``yaml.safe_load`` does, but for ``EXPONENT_FLOAT``: the one parser of config files and
    ``--set`` values (training, bench, rig, import, quickstart)."""
    return yaml.load(text, Loader=YamlLoader)  # a SafeLoader: yaml.safe_load with one resolver more


def dump_yaml(obj, **kw) -> str:
    """``yaml.safe_dump`` whose output ``parse_yaml`` reads back as it was (the string '1e5' quoted)."""
    return yaml.dump(obj, Dumper=YamlDumper, **kw)


def load_yaml(path: str | Path) -> dict:
    """Parse a YAML mapping; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("no such config file", file=path)
    try:
        data = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML ({e})", file=path) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"not a text file in UTF-8 (byte {e.start}: {e.reason}): is it the config?",
                          file=path) from None
    if not isinstance(data, dict):
        raise ConfigError(f"top level must be a mapping, got {type(data).__name__}", file=path)
    return data


def apply_overrides(cfg: dict, overrides: list[str], *, file=None) -> dict:
    """Return a copy of ``cfg`` with ``a.b.c=value`` overrides applied (values parsed as YAML: ``parse_yaml``)."""
    cfg = copy.deepcopy(cfg)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like KEY=VALUE", file=file)
        key, raw = item.split("=", 1)
        try:
            value = parse_yaml(raw)
        except DuplicateKeyError as e:  # a mapping with a key twice: not text to keep as a string
            raise ConfigError(f"{raw!r}: {e.problem}", file=file, key=key.strip()) from None
        except yaml.YAMLError:
            value = raw
        node = cfg
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"cannot set '{key}': '{p}' is not a mapping", file=file, key=key)
        node[parts[-1]] = value
    return cfg


def check_override_keys(cfg: dict, overrides: list[str], *, open_keys=(), source=SET_SOURCE) -> None:
    """Refuse an override whose dotted key ``cfg`` does not hold (a misspelt ``--set`` would otherwise be ignored
    and the run go on at its defaults): the error names the key and its close matches. Keys under ``open_keys``
    (mappings of the user's own names, e.g. ``surrogate.rows``) may be new."""
    for item in overrides:
        if "=" not in item:
            continue  # apply_overrides refuses it, saying what an override looks like
        key = item.split("=", 1)[0].strip()
        node, where = cfg, []
        for part in key.split("."):
            if ".".join(where) in open_keys:
                break
            if not isinstance(node, dict):
                raise ConfigError(f"cannot set '{key}': '{'.'.join(where)}' is not a mapping", file=source, key=key)
            check_keys({part: None}, node, where=".".join(where), file=source)
            node, where = node[part], where + [part]


@contextlib.contextmanager
def naming_overrides(overrides):
    """Inside it, a ``ConfigError`` about a key that an override set names the command line (``SET_SOURCE``), not
    the config file it was checked against: a misspelt ``--set`` the file never held."""
    try:
        yield
    except ConfigError as e:
        field = e.location.field
        keys = [item.split("=", 1)[0].strip() for item in overrides if "=" in item]
        if field and any(field == k or field.startswith(k + ".") or k.startswith(field + ".") for k in keys):
            raise ConfigError(e.reason, file=SET_SOURCE, key=field) from None
        raise


def get_dotted(cfg: dict, dotted: str):
    """The value at a dotted key (``data.root``), or None where any part is missing."""
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_dotted(cfg: dict, dotted: str, value) -> None:
    """Set the value at a dotted key whose parents exist."""
    *head, last = dotted.split(".")
    node = cfg
    for part in head:
        node = node[part]
    node[last] = value


def merge(base: dict, update: dict) -> dict:
    """Deep merge: ``update`` wins; mappings are merged key by key."""
    out = copy.deepcopy(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def check_keys(section: dict, allowed, *, where: str, file=None) -> None:
    """Reject unknown keys, naming the key, the allowed ones and the close matches."""
    for k in section:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), [str(a) for a in allowed], n=2, cutoff=0.6)
            names = [f"'{where}.{c}'" if where else f"'{c}'" for c in close]
            hint = f"; did you mean {' or '.join(names)}?" if close else ""
            raise ConfigError(f"unknown key; allowed: {sorted(allowed)}{hint}", file=file,
                              key=f"{where}.{k}" if where else k)


def expand_env(value: str, *, file=None, key=None) -> str:
    """Expand ``${VAR}`` in a path; ``SURROGATE_DATA`` defaults to the shared data folder,
    other unset variables are errors naming the key."""
    from .paths import shared_data_dir

    def sub(m):
        var = m.group(1)
        if var == "SURROGATE_DATA":
            return str(shared_data_dir().resolve())
        if var not in os.environ:
            raise ConfigError(f"environment variable ${{{var}}} is not set", file=file, key=key)
        return os.environ[var]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, value)


def plain(obj):
    """``obj`` as plain JSON types: numpy values to Python numbers and lists, tuples to lists, paths to
    strings, mapping keys to strings (anything else is left as it is)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (np.ndarray, np.generic)):
        return plain(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def config_hash(cfg: dict) -> str:
    """sha256 (hex) of the canonical JSON of a loaded config (``plain``, sorted keys, no spaces, ASCII;
    an infinite value as JSON's ``Infinity``)."""
    text = json.dumps(plain(cfg), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
