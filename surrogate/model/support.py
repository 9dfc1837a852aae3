"""The training support of a contact network, and the weight with which its corrections apply there.

A network's corrections are fitted where its training contacts were; outside that range they are an
extrapolation nothing checked. With ``ContactLawGNN(support_std=k)`` a contact's corrections are scaled by a
weight that is 1 while every input the network reads lies within ``k`` training standard deviations of the
training mean, falls linearly to 0 at ``2 k`` and stays 0 beyond: there the contact gets the fitted law, the
physics prior, instead of an extrapolated correction. A contact of a shape type no training contact had (a
capsule, when only boxes and meshes were trained on) has a one-hot input far outside its constant training
value, so it gets the law. The weight only scales corrections inside their bounds, so every property of the law
holds (passive, zero force at separation); the stiffness correction's weight reads configuration features only,
so the elastic force stays a function of configuration.

The range is the normalizers' raw statistics (``training_range``; the stepper's ``sim.contact.InputRange``, which
counts out-of-range inputs, reads the same). Plain numpy: the twin's eval-mode path and the stepper's numpy
network call the same function.
"""

from __future__ import annotations

import numpy as np

STD_FLOOR = 1e-4  # nondimensional: a feature constant in training (a one-hot) gets this band


def training_range(norm) -> tuple[np.ndarray, np.ndarray]:
    """(mean [F], std [F]) float64 of a ``layers.Normalizer``'s accumulated raw statistics, the std floored at
    ``STD_FLOOR`` (not the normalizer's own std, which maps a constant feature's std to 1)."""
    c = max(float(norm.count), 1.0)
    mean = norm.sum.detach().double().numpy() / c
    std = np.sqrt(np.maximum(norm.sumsq.detach().double().numpy() / c - mean * mean, 0.0))
    return mean, np.maximum(std, STD_FLOOR)


def _deviation(x: np.ndarray, rng: tuple[np.ndarray, np.ndarray], cols) -> np.ndarray:
    """[R] the largest |x - mean| / std over the columns ``cols`` of ``x`` [R, F] (0 where there are none)."""
    if len(x) == 0 or len(cols) == 0:
        return np.zeros(len(x))
    mean, std = rng
    cols = np.asarray(cols)
    return (np.abs(np.asarray(x, dtype=np.float64)[:, cols] - mean[cols]) / std[cols]).max(axis=1)


def _ramp(z: np.ndarray, k: float) -> np.ndarray:
    """1 for z <= k, 0 for z >= 2 k, linear between."""
    return np.clip(2.0 - z / k, 0.0, 1.0)


def support_weights(k: float, ef, nf, edge_index, edge_range, node_range, edge_cols, config_cols, hist=None,
                    hist_range=None) -> tuple[np.ndarray, np.ndarray]:
    """(w_config [E], w [E]) float64 in [0, 1]: the weights of one batched graph's corrections.

    ``ef`` [E, 41] / ``nf`` [N, 9] / ``hist`` [E, H] raw features (numpy), ``edge_index`` [2, E], ``*_range`` the
    (mean, std) of ``training_range``; ``edge_cols`` the edge columns the network reads, ``config_cols`` those its
    stiffness head reads. ``w_config`` (the stiffness correction's) reads ``config_cols`` only; ``w`` (damping,
    friction and the other heads') every edge column read, both ends' node features and the history.
    """
    z_config = _deviation(ef, edge_range, config_cols)
    z = np.maximum(z_config, _deviation(ef, edge_range, edge_cols))
    zn = _deviation(nf, node_range, range(np.shape(nf)[1]))
    if len(z):
        src, dst = np.asarray(edge_index)
        z = np.maximum(z, np.maximum(zn[src], zn[dst]))
    if hist is not None and np.shape(hist)[1]:
        z = np.maximum(z, _deviation(hist, hist_range, range(np.shape(hist)[1])))
    return _ramp(z_config, k), _ramp(z, k)


def _numpy(x):
    return None if x is None else (x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x))


def model_ranges(model) -> dict:
    """The training range (``training_range``) of each of a ``ContactLawGNN``'s normalized inputs:
    {"edge", "node"[, "hist"]}."""
    out = {"edge": training_range(model.edge_norm), "node": training_range(model.node_norm)}
    if model.history:
        out["hist"] = training_range(model.hist_norm)
    return out


def model_support_weights(model, edge_index, ef, nf, hist=None, ranges: dict | None = None) -> tuple:
    """``support_weights`` of a ``ContactLawGNN`` (its ``support_std``, the columns it reads, its ``ranges``, default
    ``model_ranges(model)``) for raw features ``ef`` [E, 41], ``nf`` [N, 9], ``hist`` [E, 4] (torch or numpy)."""
    r = model_ranges(model) if ranges is None else ranges
    return support_weights(model.support_std, _numpy(ef), _numpy(nf), _numpy(edge_index), r["edge"], r["node"],
                           _numpy(model.edge_input_index), _numpy(model.config_index), _numpy(hist), r.get("hist"))
