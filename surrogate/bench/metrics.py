"""The benchmarks' trajectory metrics; they live in ``surrogate.metrics`` (one implementation,
used by training-time validation and every suite alike)."""

from ..metrics import bootstrap_ci, box_penetration, first_divergence, geodesic_deg, horizon_errors, pose_errors, summarize  # noqa: F401
