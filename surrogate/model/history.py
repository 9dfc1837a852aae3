"""Per-contact history carried across physics steps: the state of the law's presliding spring and what the network
sees of a contact's past (``ContactLawGNN`` with ``history``). One implementation, numpy, used by the hybrid stepper
(``sim.law_solve``: one ``MjData`` per environment and the copies path alike) and by the twin (``sim.twin``).

MuJoCo re-detects contacts every step, with no identity. A contact of this step continues one of the previous step
when it has the same environment and geom pair and its point, in the *other* body's frame (its COM and inertial
axes: a pad's or the table's), is the nearest previous one within ``tolerance`` x the object size L. Matching is one
to one (the closest pairs first): a state is never copied into two contacts, so the spring's stored energy cannot
double. A contact that appears starts from zero state; one that disappears is dropped.

State per contact (``ContactState``; stored in the other body's frame, so it turns with that body and is as
invariant as the rest of the graph):

    z [E, 3]     tangential presliding displacement (m)            (``presliding.presliding_start`` / ``presliding_end``)
    age [E]      time under load (s): 0 when the contact carried no normal force at the end of the last step
    fn_last [E]  normal force at the end of the last step (N)
    k_last [E]   the spring stiffness z was stored with (N/m): a stiffer spring at the next step must not turn the
                 stored displacement into more energy (``presliding.presliding_start``)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

TOLERANCE = 0.1  # of the object size L: well below the spacing of a box's corner contacts (L)


class ContactState(NamedTuple):
    """The state of E contacts (numpy or torch; ``z`` in world axes when handed to a model)."""

    z: object
    age: object
    fn_last: object
    k_last: object

    @classmethod
    def zeros(cls, E: int) -> ContactState:
        return cls(np.zeros((E, 3)), np.zeros(E), np.zeros(E), np.zeros(E))


class ContactKeys(NamedTuple):
    """What identifies E contacts of one step: env [E] int64, pair [E] int64 (object geom * ngeom + other geom),
    point [E, 3] (m, in the other body's frame), rot [E, 3, 3] (the other body's frame: world = rot @ local),
    tol [E] (m, the matching tolerance)."""

    env: np.ndarray
    pair: np.ndarray
    point: np.ndarray
    rot: np.ndarray
    tol: np.ndarray


def contact_keys(cb, length: float, *, env_offset: int = 0, tolerance: float = TOLERANCE) -> ContactKeys:
    """The ``ContactKeys`` of a ``batch_graph.ContactBatch`` (``length``: the object size L, m)."""
    cs = cb.contact_set
    rot, point = cb.frames
    pair = (cs.g_obj.astype(np.int64) << 20) + cs.g_oth.astype(np.int64)  # geom ids < 2^20
    return ContactKeys(cs.env.astype(np.int64) + env_offset, pair, point, rot, np.full(len(cs.env), tolerance * length))


def concat_keys(keys: list[ContactKeys]) -> ContactKeys:
    return ContactKeys(*(np.concatenate(x) for x in zip(*keys))) if len(keys) != 1 else keys[0]


def match(prev_env, prev_pair, prev_point, env, pair, point, tol) -> np.ndarray:
    """[E] the index of the previous contact each new one continues (-1: none): the same environment and pair, the
    point within ``tol`` [E], one to one, the closest pairs first."""
    E, P = len(env), len(prev_env)
    out = np.full(E, -1, dtype=np.int64)
    if not E or not P:
        return out
    # candidates: every (new, previous) with the same (env, pair), from the previous keys sorted
    prev_key, key = (prev_env << 40) + prev_pair, (env << 40) + pair  # env < 2^23, pair < 2^40
    order = np.argsort(prev_key, kind="stable")
    ks = prev_key[order]
    lo, hi = np.searchsorted(ks, key, "left"), np.searchsorted(ks, key, "right")
    cnt = hi - lo
    if not cnt.any():
        return out
    ni = np.repeat(np.arange(E), cnt)
    pj = order[np.repeat(lo, cnt) + np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)]
    d = np.linalg.norm(point[ni] - prev_point[pj], axis=1)
    ok = d <= tol[ni]
    ni, pj, d = ni[ok], pj[ok], d[ok]
    s = np.argsort(d, kind="stable")
    ni, pj = ni[s], pj[s]
    while len(ni):  # each round accepts the pairs that are each other's nearest (the closest overall always is)
        _, first_n = np.unique(ni, return_index=True)  # each new contact's nearest remaining previous one
        cand_n, cand_p = ni[first_n], pj[first_n]
        o = np.argsort(first_n, kind="stable")  # in distance order
        cand_n, cand_p = cand_n[o], cand_p[o]
        _, first_p = np.unique(cand_p, return_index=True)
        acc_n, acc_p = cand_n[first_p], cand_p[first_p]
        out[acc_n] = acc_p
        if len(acc_n) == len(cand_n):  # every new contact with a candidate is matched (the usual case): done
            break
        keep = ~np.isin(ni, acc_n) & ~np.isin(pj, acc_p)
        ni, pj = ni[keep], pj[keep]
    return out


class ContactHistory:
    """The per-contact state of B environments between physics steps (module docstring).

    Per step: ``lookup(keys)`` gives the state of this step's contacts (world axes) and ``store(keys, state)`` replaces
    the whole history by this step's contacts' end-of-step state (world axes; stored in the other body's frame)."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.env = np.zeros(0, dtype=np.int64)
        self.pair = np.zeros(0, dtype=np.int64)
        self.point = np.zeros((0, 3))
        self.z = np.zeros((0, 3))
        self.age, self.fn_last, self.k_last = np.zeros(0), np.zeros(0), np.zeros(0)

    def __len__(self) -> int:
        return len(self.env)

    def reset(self, envs=None) -> None:
        """Forget the contacts of ``envs`` (an environment reset; None: all)."""
        if envs is None:
            return self.clear()
        keep = ~np.isin(self.env, np.asarray(envs, dtype=np.int64))
        for name in ("env", "pair", "point", "z", "age", "fn_last", "k_last"):
            setattr(self, name, getattr(self, name)[keep])

    def lookup(self, keys: ContactKeys) -> ContactState:
        """The state (``z`` in world axes) of the contacts ``keys``: a matched previous contact's, else zero."""
        idx = match(self.env, self.pair, self.point, keys.env, keys.pair, keys.point, keys.tol)
        hit = idx >= 0
        j = np.where(hit, idx, 0)
        E = len(idx)
        if not len(self.env):
            return ContactState.zeros(E)
        z_local = np.where(hit[:, None], self.z[j], 0.0)
        z = np.einsum("eij,ej->ei", keys.rot, z_local)
        return ContactState(z, np.where(hit, self.age[j], 0.0), np.where(hit, self.fn_last[j], 0.0),
                            np.where(hit, self.k_last[j], 0.0))

    def store(self, keys: ContactKeys, state: ContactState) -> None:
        """The history becomes ``keys``' contacts with ``state`` (numpy, ``z`` in world axes)."""
        self.env, self.pair, self.point = keys.env, keys.pair, keys.point
        self.z = np.einsum("eji,ej->ei", keys.rot, np.asarray(state.z, dtype=np.float64))  # rot^T z: the local frame
        self.age, self.fn_last, self.k_last = (np.asarray(x, dtype=np.float64).copy()
                                               for x in (state.age, state.fn_last, state.k_last))
