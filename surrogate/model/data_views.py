"""Numpy views of the ``MjData`` arrays a hybrid physics step reads and writes, made once per batch.

MuJoCo's attribute access builds a new numpy view on every read (~0.5 us each; ``data.contact`` and its four
fields ~4 us per environment), a dozen reads per environment and physics step. An ``MjData`` allocates its
arrays once, so a view stays valid for its life (``mj_resetData`` and ``mj_copyData`` write into the same
memory): ``DataViews`` makes them once per batch and the stepper keeps it (``views_for``) until it steps
another batch. ``batch_graph.GraphBuilder.gather`` reads the batch through it.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np


class DataViews:
    """The views of a batch of ``MjData``; holds the ``MjData`` alive.

    Each field is a list of B views: ``xipos, cvel, subtree_com, ximat`` [nbody, ...], ``cdof`` [nv, 6], ``M``
    [nM], ``qvel, qacc_smooth, qfrc_applied`` [nv], ``warning_number`` [mjNWARNING] (MuJoCo's warning counters).
    The contacts: ``contacts()``.
    """

    FIELDS = ("xipos", "cvel", "subtree_com", "ximat", "cdof", "M", "qvel", "qacc_smooth", "qfrc_applied")

    def __init__(self, datas: Sequence[mujoco.MjData]):
        self.datas = tuple(datas)
        for f in self.FIELDS:
            setattr(self, f, [getattr(d, f) for d in self.datas])
        self.warning_number = [d.warning.number for d in self.datas]  # [mjNWARNING] int32 counters
        B = len(self.datas)
        self._ncon = [-1] * B  # the contact count each environment's contact views were made for
        self._contact = ([None] * B, [None] * B)  # geom [ncon, 2], (dist, pos, frame) [ncon, 13]
        self._rows = [ContactRows() for _ in range(B)]

    @property
    def num_envs(self) -> int:
        return len(self.datas)

    def stack(self, name: str) -> np.ndarray:
        """[B, ...] the field ``name`` (one of ``FIELDS``) of every environment, stacked (a copy)."""
        parts = getattr(self, name)
        if len(parts) == 1:  # a single environment (a Gymnasium env): np.stack's own overhead is most of the read
            return parts[0].copy()[None]
        return np.stack(parts) if parts else np.zeros((0,))

    def stacked_contacts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ncon [B] int64, geom [C, 2], dist/pos/frame [C, 13] float64) of all contacts of all environments, in order
        (environment 0's first): ``contacts()`` copied once into stacked arrays."""
        ncon, geoms, dpf = self.contacts()
        ncon = np.array(ncon, dtype=np.int64)
        if len(ncon) and ncon.any():
            return ncon, np.concatenate(geoms), np.concatenate(dpf)
        return ncon, np.empty((0, 2), dtype=np.int32), np.empty((0, 13))

    def contact_index(self, env: np.ndarray, cid: np.ndarray) -> np.ndarray:
        """[E] the index in its environment's ``data.contact`` of contact ``cid`` of environment ``env`` (the same:
        each environment has its own ``MjData``)."""
        return cid

    def matches(self, datas: Sequence[mujoco.MjData]) -> bool:
        """Whether these are the views of exactly ``datas`` (the same objects, in order)."""
        return len(datas) == len(self.datas) and all(a is b for a, b in zip(datas, self.datas))

    def contacts(self) -> tuple[list[int], list, list]:
        """(ncon per environment, and per environment views of its ``contact.geom`` [ncon, 2] int32 and of its
        ``contact.dist, pos, frame`` side by side [ncon, 13] float64) of the current contacts.

        A view of ``data.contact`` holds exactly the ``ncon`` rows it was made with, so the views are remade for
        an environment whose count changed, and reused while it stays (a held object: most steps). Reusing them
        reads this step's contacts because MuJoCo keeps the contact array at the start of the ``MjData``'s arena,
        whose address never changes (its collision driver resets the arena to ``ncon * sizeof(mjContact)``
        bytes past the start, ``resetArena``): contact i is at the same address every step. ``dist``, ``pos``
        and ``frame`` are the first 13 numbers of MuJoCo's ``mjContact``, so one strided view of each contact's
        first 13 doubles reads all three (checked against the bindings' own views; three views otherwise).
        ``tests/test_speed_contact_views.py`` checks the reused views against fresh reads while contacts come and go.
        """
        ncon = [d.ncon for d in self.datas]
        if ncon != self._ncon:
            geom, dpf = self._contact
            for i, (n, old) in enumerate(zip(ncon, self._ncon)):
                if n != old:
                    geom[i], dpf[i] = self._rows[i].read(self.datas[i], n)
            self._ncon = ncon
        return (ncon, *self._contact)


class ContactRows:
    """Views of the first n rows of an ``MjData``'s contact array (``geom`` [n, 2] int32, dist/pos/frame [n, 13]),
    made from ``data.contact`` only when n exceeds the most rows seen so far, else sliced from the views of that
    many rows: contacts come and go every few steps, and ``data.contact`` with its fields costs ~10 us to make. The
    rows past the current count are memory of the arena's start that held contacts before (``DataViews.contacts``);
    only the first n are ever read. A copy (fields not adjacent in ``mjContact``) is never kept."""

    def __init__(self):
        self.cap, self.geom, self.dpf = -1, None, None

    def read(self, d: mujoco.MjData, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n <= self.cap:
            return self.geom[:n], self.dpf[:n]
        c = d.contact
        geom, (dpf, view) = c.geom, _dist_pos_frame(c, with_kind=True)
        if view:
            self.cap, self.geom, self.dpf = n, geom, dpf
        return geom, dpf


def _dist_pos_frame(c, *, with_kind: bool = False):
    """[ncon, 13] (dist, pos, frame) of a ``data.contact``: one strided view when they are adjacent in each
    ``mjContact`` (as MuJoCo declares them), else a copy of the three. ``with_kind``: (that, whether it is a view)."""
    dist, pos, frame = c.dist, c.pos, c.frame
    base, step = dist.ctypes.data, dist.strides[0] if len(dist) else 0
    if (len(dist) and pos.ctypes.data == base + 8 and frame.ctypes.data == base + 32 and pos.strides == (step, 8)
            and frame.strides == (step, 8) and dist.dtype == pos.dtype == frame.dtype == np.float64):
        out = np.lib.stride_tricks.as_strided(dist, shape=(len(dist), 13), strides=(step, 8), writeable=False)
        return (out, True) if with_kind else out
    out = np.concatenate([dist[:, None], pos, frame], axis=1).reshape(len(dist), 13)
    return (out, False) if with_kind else out


def views_for(cached: DataViews | None, datas: Sequence[mujoco.MjData]) -> DataViews:
    """``cached`` if it is the batch ``datas``' views, else new ones."""
    return cached if isinstance(cached, DataViews) and cached.matches(datas) else DataViews(datas)
