"""Which geom pairs MuJoCo's dynamic (bitmask) collision tests in a model, and the contact parameters it mixes for
each: the one list of both, used to turn dynamic collisions into explicit pairs with the same physics (the copies of
``sim.copies_model``, the owned pairs of a user's model in ``scenes.from_model``)."""

from __future__ import annotations

import mujoco
import numpy as np

from surrogate.errors import ConfigError

_MINVAL = 1e-15  # MuJoCo's mjMINVAL (solmix below it counts as zero)


def dynamic_geom_pairs(m: mujoco.MjModel) -> list[tuple[int, int]]:
    """Geom pairs (g1 < g2, g1 on the body of lower id) that MuJoCo's dynamic collision would test in ``m``: the
    bitmask filter (``contype & conaffinity`` either way), the body filter (not the same weld body; with the parent
    filter on, not a welded body and its parent's weld body, unless one is the world), excluded body pairs, and
    pairs that have an explicit ``pair`` (MuJoCo skips those: ``mj_collideGeomPair`` with ``merged``)."""
    if m.nflex:
        raise ConfigError("scenes with flexes are not supported (their collisions are not listed here)", key="model")
    filterparent = not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = {int(s) for s in m.exclude_signature}
    explicit = {frozenset((int(a), int(b))) for a, b in zip(m.pair_geom1, m.pair_geom2)}
    weld = m.body_weldid
    out = []
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not ((m.geom_contype[g1] & m.geom_conaffinity[g2]) or (m.geom_contype[g2] & m.geom_conaffinity[g1])):
                continue
            b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
            w1, w2 = int(weld[b1]), int(weld[b2])
            if w1 == w2:
                continue
            p1, p2 = int(weld[m.body_parentid[w1]]), int(weld[m.body_parentid[w2]])
            if filterparent and w1 and w2 and (w1 == p2 or w2 == p1):
                continue
            lo, hi = min(b1, b2), max(b1, b2)
            if (lo << 16) + hi in excluded or frozenset((g1, g2)) in explicit:
                continue
            out.append((g1, g2) if b1 <= b2 else (g2, g1))
    return out


def mixed_pair_params(m: mujoco.MjModel, g1: int, g2: int) -> dict:
    """The contact parameters MuJoCo's dynamic collision gives geoms ``g1``, ``g2`` (``mj_contactParam``: the
    higher priority's, else condim and friction the larger, solref and solimp mixed by ``solmix``, or for a direct
    solref the smaller; margin and gap the sums), as ``MjsPair`` fields."""
    if m.geom_priority[g1] != m.geom_priority[g2]:
        i = g1 if m.geom_priority[g1] > m.geom_priority[g2] else g2
        condim, solref = int(m.geom_condim[i]), m.geom_solref[i].copy()
        solimp, fri = m.geom_solimp[i].copy(), m.geom_friction[i].copy()
    else:
        condim = int(max(m.geom_condim[g1], m.geom_condim[g2]))
        s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
        if s1 >= _MINVAL and s2 >= _MINVAL:
            mix = s1 / (s1 + s2)
        elif s1 < _MINVAL and s2 < _MINVAL:
            mix = 0.5
        else:
            mix = 0.0 if s1 < _MINVAL else 1.0
        r1, r2 = m.geom_solref[g1], m.geom_solref[g2]
        solref = mix * r1 + (1 - mix) * r2 if (r1[0] > 0 and r2[0] > 0) else np.minimum(r1, r2)
        solimp = mix * m.geom_solimp[g1] + (1 - mix) * m.geom_solimp[g2]
        fri = np.maximum(m.geom_friction[g1], m.geom_friction[g2])
    # margin and gap of a dynamic contact: the two geoms' sum in MuJoCo 4 (``getMargin`` / ``getGap`` of its collision
    # driver; checked against MuJoCo's own contacts by tests/test_copies.py)
    return {"condim": condim, "solref": np.asarray(solref, dtype=float), "solimp": np.asarray(solimp, dtype=float),
            "friction": np.array([fri[0], fri[0], fri[1], fri[2], fri[2]]),
            "margin": float(m.geom_margin[g1] + m.geom_margin[g2]), "gap": float(m.geom_gap[g1] + m.geom_gap[g2])}
