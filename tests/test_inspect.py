"""``surrogate inspect``'s rest height: the object's height on the surface where an episode ends at rest on it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from surrogate.inspect import rest_height


def _episode(z_start: float, z_end: float, frames: int = 40):
    z = np.concatenate([np.linspace(z_start, z_end, frames // 2), np.full(frames - frames // 2, z_end)])
    pose = np.zeros((frames, 7))
    pose[:, 2], pose[:, 3] = z, 1.0
    return SimpleNamespace(num_frames=frames, object_pose=pose, timestamps=np.arange(frames) / 100.0,
                           environment=SimpleNamespace(kind="table", height=0.5))


def test_an_object_held_still_in_the_air_is_not_at_rest_on_the_surface():
    """A grasp that ends with the object lifted and held still counted as resting (0.094 m "above the surface")."""
    assert rest_height(_episode(0.53, 0.53)) == pytest.approx(0.03)  # a grasp that never lifted: on the table
    assert rest_height(_episode(0.70, 0.53)) == pytest.approx(0.03)  # a toss that came to rest
    assert rest_height(_episode(0.53, 0.62)) is None  # lifted 9 cm and held still


def test_a_skipped_input_without_a_file_is_listed_by_what_is_known():
    """An episode the writer rejected (a duplicate id from ep0.csv and ep0.npz) was stored as file 'None' and listed
    as 'None: episode ep0: ...'; inspect printed "episode None" and "field 'None'" for entries without them."""
    from surrogate.errors import CaptureError
    from surrogate.importers.report import ImportReport, skipped_lines

    report = ImportReport()
    report.skip(CaptureError("duplicate episode id", episode="ep0", field="episode_id"))
    report.skip(ValueError("unreadable"), file="a.csv")
    assert report.skipped[0]["file"] is None
    assert skipped_lines(report.skipped) == ["  - episode ep0: field 'episode_id': duplicate episode id",
                                             "  - a.csv: ValueError: unreadable"]
