"""The capture format: LeRobotDataset v3 layout plus ``meta/contact.json``.

See docs/capture-format.md for every field and unit.
"""

from .episode import DatasetMeta, Environment, Episode, ObjectSpec, Provenance
from .reader import CaptureDataset, dataset_hash, read_dataset, read_metadata
from .schema import FEATURE_KEYS, FEIX_GRASP_TYPES, SCHEMA_VERSION
from .validate import validate_episode, validate_meta
from .writer import CaptureWriter, write_dataset

__all__ = [
    "CaptureDataset", "CaptureWriter", "dataset_hash", "DatasetMeta", "Environment", "Episode", "FEATURE_KEYS",
    "FEIX_GRASP_TYPES", "ObjectSpec", "Provenance", "SCHEMA_VERSION", "read_dataset", "read_metadata",
    "validate_episode", "validate_meta", "write_dataset",
]
