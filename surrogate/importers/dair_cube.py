"""dair_pll's copies of the ContactNets cube tosses: [T, 13] in Drake's state order and metres, read as the cube.

The DAIR Lab's dair_pll repository (branch ``main``, ``assets/contactnets_cube``) stores the ContactNets tosses in
the layout of its other objects (``dair_urdf``): quaternion w x y z, position in m, body-frame angular velocity,
world linear velocity in m/s; no ``experiment.json``. ``import_contactnets`` without a URDF reads such a file as the
ContactNets cube (converted to that importer's layout, the authors' values for the object) and says so in its report.
"""

from __future__ import annotations

import numpy as np

from ..errors import CaptureError
from .contactnets import CUBE_WIDTH_M, DAIR_COLUMNS, HALF_WIDTH_M, N_COLUMNS
from .floor_check import rest_gap_warnings
from .report import ImportReport

DAIR_FIELDS = {"quaternion": slice(0, 4), "position": slice(4, 7), "angular_velocity": slice(7, 10),
               "linear_velocity": slice(10, 13)}  # dair_pll's columns of a body without joints (``dair_urdf.columns``)


def from_dair_layout(a: np.ndarray, *, file="", episode=None) -> np.ndarray:
    """A cube toss [T, 13] in dair_pll's layout (``DAIR_FIELDS``: quaternion w x y z, position in m, body-frame angular
    velocity, world linear velocity in m/s) as the ContactNets files hold it: [T, 19] in cube half-widths, zero
    control. A non-finite value is refused naming the file's own column and field."""
    bad = ~np.isfinite(a)
    if bad.any():
        f, col = np.argwhere(bad)[0]
        field = next(k for k, sl in DAIR_FIELDS.items() if sl.start <= col < sl.stop)
        raise CaptureError(f"non-finite value at frame {f}, column {col} of dair_pll's [T, 13] layout", file=file,
                           episode=episode, field=field)
    out = np.zeros((len(a), N_COLUMNS))
    out[:, 0:3] = a[:, 4:7] / HALF_WIDTH_M
    out[:, 3:7] = a[:, 0:4]
    out[:, 7:10] = a[:, 10:13] / HALF_WIDTH_M
    out[:, 10:13] = a[:, 7:10]
    return out


def to_cube_layout(arrays: list, report: ImportReport) -> tuple[list, set]:
    """(``arrays`` [(name, toss id, [T, 19] or [T, 13])] with dair_pll's copies converted to the ContactNets layout, the
    ids of those copies); a copy that cannot be converted is skipped and reported."""
    out, dair = [], set()
    for name, toss_id, a in arrays:
        if a.shape[1] == DAIR_COLUMNS:
            try:
                a = from_dair_layout(a, file=name, episode=toss_id)
            except CaptureError as e:
                report.skip(e, file=name, episode=toss_id)
                continue
            dair.add(toss_id)
        out.append((name, toss_id, a))
    return out, dair


def dair_cube_warnings(episodes: list, dair: set) -> list[str]:
    """What the import says of the [T, 13] files it read as the ContactNets cube (the only object it knows without a
    URDF): that it did, and where the kept ones come to rest off the cube's own surface (another object's tosses)."""
    h = HALF_WIDTH_M
    corners = np.array([[x, y, z] for x in (-h, h) for y in (-h, h) for z in (-h, h)])
    kept = [e for e in episodes if e.episode_id in dair]
    if not kept:
        return []
    return ([f"{len(kept)} kept toss(es) from files in dair_pll's [T, 13] layout, read as the ContactNets cube "
             f"({CUBE_WIDTH_M} m wide); tosses of another object need its URDF (--urdf)"]
            + rest_gap_warnings(corners, CUBE_WIDTH_M, kept))
