"""A contact network's inference compiled (numba): the features of every contact and body, and the encode-process-decode
pass, in loops over the rows, for ``network_numpy.NumpyNetwork``.

Why: a stepped scene holds about 12 contacts per environment. Vectorized numpy spends nearly all of a batch of one in
per-call overhead (about 60 calls, a few microseconds each), and at a batch of 256 (3,072 contacts) in the
temporaries of fancy indexing; a compiled loop does neither, and keeps each contact's 32-wide rows in cache.

The arithmetic is ``graph.edge_features`` / ``graph.node_features`` (float64, cast to float32) and ``layers.mlp`` /
``layers.InteractionLayer`` (float32) line for line; only the order of the sums differs from torch's, within float32
rounding (``tests/test_network_numpy.py`` holds the result to the torch model).

A network's MLPs are packed once (``pack_mlps``) into one float32 buffer and two index tables, so one compiled
function serves every width, depth and number of message-passing steps.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# ``graph.EDGE_SCALARS``: the 17 invariant scalars of a contact, then the two bodies' 12 geometry columns (8 type
# one-hots, then bounding radius and three half-sizes, which are lengths).
N_EDGE = 41
N_NODE = 9
# The MLPs' dot products may be summed in any order (so vectorized); NaN and infinity keep their meaning, which the
# stepper's force guard reads.
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@njit(cache=True, inline="always")
def _dot(a0, a1, a2, b0, b1, b2):
    return a0 * b0 + a1 * b1 + a2 * b2


@njit(cache=True, inline="always")
def _tangential(x0, x1, x2, n0, n1, n2):
    """(the part of x normal to n, x . n)."""
    xn = x0 * n0 + x1 * n1 + x2 * n2
    return x0 - xn * n0, x1 - xn * n1, x2 - xn * n2, xn


@njit(cache=True, inline="always")
def _triple(n0, n1, n2, a0, a1, a2, b0, b1, b2):
    """n . (a x b)."""
    return n0 * (a1 * b2 - a2 * b1) + n1 * (a2 * b0 - a0 * b2) + n2 * (a0 * b1 - a1 * b0)


@njit(cache=True, inline="always")
def _norm(a0, a1, a2):
    return math.sqrt(a0 * a0 + a1 * a1 + a2 * a2 + 1e-12)


@njit(cache=True, inline="always")
def _units(gravity, length, graph):
    """(L, V, gravity's direction) of one graph, as ``graph.units``."""
    g0, g1, g2 = gravity[graph, 0], gravity[graph, 1], gravity[graph, 2]
    gn = max(math.sqrt(g0 * g0 + g1 * g1 + g2 * g2), 1e-6)
    L = length[graph]
    return L, math.sqrt(gn * L), g0 / gn, g1 / gn, g2 / gn


@njit(cache=True, inline="always")
def _relative_velocity(vel, omega, r_obj, r_oth, s, o, i):
    """Contact ``i``'s (v_o + w_o x r_obj) - (v_s + w_s x r_oth): ``graph.relative_velocity``."""
    ro0, ro1, ro2 = r_obj[i, 0], r_obj[i, 1], r_obj[i, 2]
    rs0, rs1, rs2 = r_oth[i, 0], r_oth[i, 1], r_oth[i, 2]
    wo0, wo1, wo2 = omega[o, 0], omega[o, 1], omega[o, 2]
    ws0, ws1, ws2 = omega[s, 0], omega[s, 1], omega[s, 2]
    return ((vel[o, 0] + (wo1 * ro2 - wo2 * ro1)) - (vel[s, 0] + (ws1 * rs2 - ws2 * rs1)),
            (vel[o, 1] + (wo2 * ro0 - wo0 * ro2)) - (vel[s, 1] + (ws2 * rs0 - ws0 * rs2)),
            (vel[o, 2] + (wo0 * ro1 - wo1 * ro0)) - (vel[s, 2] + (ws0 * rs1 - ws1 * rs0)))


@njit(cache=True)
def edge_features(edge_index, batch, normal, dist, r_obj, r_oth, geom_obj, geom_oth, vel, omega, gravity, length,
                  out):
    """Fill ``out`` [E, 41] float32 with ``graph.edge_features`` of the contacts (``edge_index`` [2, E]: the other
    body, the object; ``batch`` [N] each body's graph; vectors [E, 3] / [N, 3] float64 in world axes)."""
    for i in range(normal.shape[0]):
        s, o = edge_index[0, i], edge_index[1, i]
        L, V, h0, h1, h2 = _units(gravity, length, batch[o])
        n0, n1, n2 = normal[i, 0], normal[i, 1], normal[i, 2]
        ro0, ro1, ro2 = r_obj[i, 0], r_obj[i, 1], r_obj[i, 2]
        rs0, rs1, rs2 = r_oth[i, 0], r_oth[i, 1], r_oth[i, 2]
        wo0, wo1, wo2 = omega[o, 0], omega[o, 1], omega[o, 2]
        ws0, ws1, ws2 = omega[s, 0], omega[s, 1], omega[s, 2]
        v0, v1, v2 = _relative_velocity(vel, omega, r_obj, r_oth, s, o, i)
        vt0, vt1, vt2, vn = _tangential(v0, v1, v2, n0, n1, n2)
        rt0, rt1, rt2, rn = _tangential(ro0, ro1, ro2, n0, n1, n2)
        st0, st1, st2, sn = _tangential(rs0, rs1, rs2, n0, n1, n2)
        wt0, wt1, wt2, wn = _tangential(wo0 - ws0, wo1 - ws1, wo2 - ws2, n0, n1, n2)
        gt0, gt1, gt2, gn = _tangential(h0, h1, h2, n0, n1, n2)
        row = out[i]
        row[0] = dist[i] / L
        row[1] = vn / V
        row[2] = _norm(vt0, vt1, vt2) / V
        row[3] = rn / L
        row[4] = _norm(rt0, rt1, rt2) / L
        row[5] = sn / L
        row[6] = _norm(st0, st1, st2) / L
        row[7] = wn * L / V
        row[8] = _norm(wt0, wt1, wt2) * L / V
        row[9] = gn
        row[10] = _norm(gt0, gt1, gt2)
        row[11] = _dot(vt0, vt1, vt2, rt0, rt1, rt2) / (V * L)
        row[12] = _triple(n0, n1, n2, rt0, rt1, rt2, vt0, vt1, vt2) / (V * L)
        row[13] = _dot(gt0, gt1, gt2, vt0, vt1, vt2) / V
        row[14] = _triple(n0, n1, n2, gt0, gt1, gt2, vt0, vt1, vt2) / V
        row[15] = _dot(gt0, gt1, gt2, rt0, rt1, rt2) / L
        row[16] = _triple(n0, n1, n2, gt0, gt1, gt2, rt0, rt1, rt2) / L
        for j in range(12):
            row[17 + j] = geom_obj[i, j] / L if j >= 8 else geom_obj[i, j]
            row[29 + j] = geom_oth[i, j] / L if j >= 8 else geom_oth[i, j]


@njit(cache=True)
def history_features(edge_index, batch, normal, r_obj, r_oth, vel, omega, gravity, length, mass_ref, z, age, fn_last,
                     age_clip, out):
    """Fill ``out`` [E, 4] float32 with ``graph.history_features`` of the contacts and their state (``z`` [E, 3]
    presliding displacement in world axes, ``age`` [E] time under load, ``fn_last`` [E] last normal force)."""
    for i in range(normal.shape[0]):
        s, o = edge_index[0, i], edge_index[1, i]
        L, V, _, _, _ = _units(gravity, length, batch[o])
        g0, g1, g2 = gravity[batch[o], 0], gravity[batch[o], 1], gravity[batch[o], 2]
        F0 = mass_ref[batch[o]] * max(math.sqrt(g0 * g0 + g1 * g1 + g2 * g2), 1e-6)
        v0, v1, v2 = _relative_velocity(vel, omega, r_obj, r_oth, s, o, i)
        vt0, vt1, vt2, _ = _tangential(v0, v1, v2, normal[i, 0], normal[i, 1], normal[i, 2])
        z0, z1, z2 = z[i, 0], z[i, 1], z[i, 2]
        out[i, 0] = math.sqrt(z0 * z0 + z1 * z1 + z2 * z2 + 1e-30) / L
        out[i, 1] = (z0 * vt0 + z1 * vt1 + z2 * vt2) / (L * V)
        out[i, 2] = min(max(age[i] * V / L, 0.0), age_clip)
        out[i, 3] = fn_last[i] / F0


@njit(cache=True)
def node_features(batch, vel, omega, mass, inertia, static, is_object, gravity, length, mass_ref, out):
    """Fill ``out`` [N, 9] float32 with ``graph.node_features`` of the bodies."""
    for j in range(vel.shape[0]):
        L, V, h0, h1, h2 = _units(gravity, length, batch[j])
        row = out[j]
        st = static[j]
        m = max(mass[j], 1e-9)
        row[0] = st
        row[1] = is_object[j]
        row[2] = 0.0 if st > 0 else math.log(m / mass_ref[batch[j]])
        for k in range(3):
            row[3 + k] = 0.0 if st > 0 else inertia[j, k] / (m * L * L)
        row[6] = _norm(vel[j, 0], vel[j, 1], vel[j, 2]) / V
        row[7] = _dot(vel[j, 0], vel[j, 1], vel[j, 2], h0, h1, h2) / V
        row[8] = _norm(omega[j, 0], omega[j, 1], omega[j, 2]) * L / V


_blas_threads = None


def limit_blas_threads(n: int) -> None:
    """Let BLAS use at most ``n`` threads, process-wide (``threadpoolctl``; as ``torch.set_num_threads``): the network's
    matrix products are scipy's BLAS (what numba calls), whose idle OpenBLAS threads spin between calls; with two of
    them a hybrid step at a batch of 256 on a 2-core machine cost twice the CPU time (``surrogate speed --clock cpu``).
    Done once per process and thread count (an enumeration of the loaded libraries costs milliseconds)."""
    global _blas_threads
    if _blas_threads == int(n):
        return
    import scipy.linalg.cython_blas  # noqa: F401  loaded now, so that the limit reaches the BLAS the kernel calls
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=int(n), user_api="blas")
    _blas_threads = int(n)


def pack_mlps(mlps: list) -> tuple:
    """(params float32 [P], layers int64 [K, 4], mlps int64 [M, 3], eps float32 [M]) of ``mlps``, each a list of
    ``(W [out, in], b [out])`` linear layers (SiLU between them) and a LayerNorm ``(weight, bias, eps)`` or None: a
    layer row is (offset of W, offset of b, in, out), an MLP row (its first layer, its number of layers, the offset
    of its LayerNorm's weight and bias, or -1)."""
    chunks, layer_rows, mlp_rows, eps, offset = [], [], [], [], 0

    def put(a):
        nonlocal offset
        chunks.append(np.ascontiguousarray(a, dtype=np.float32).ravel())
        offset += chunks[-1].size
        return offset - chunks[-1].size

    for linears, norm in mlps:
        first = len(layer_rows)
        for W, b in linears:
            layer_rows.append((put(W), put(b), W.shape[1], W.shape[0]))
        if norm is None:
            mlp_rows.append((first, len(linears), -1))
            eps.append(0.0)
        else:
            mlp_rows.append((first, len(linears), put(np.concatenate([norm[0], norm[1]]))))
            eps.append(norm[2])
    return (np.concatenate(chunks), np.array(layer_rows, dtype=np.int64), np.array(mlp_rows, dtype=np.int64),
            np.array(eps, dtype=np.float32))


@njit(cache=True, fastmath=_FAST)
def _silu(Y):
    """``Y <- Y / (1 + exp(-Y))`` in place (float32, C-contiguous), in loops the compiler vectorizes: ``math.exp`` is a
    libm call per element, most of the network's time at a thousand contacts. ``exp(x) = 2^k exp(r)``, ``k`` the
    integer nearest ``x / ln 2``, ``r = x - k ln 2`` in two parts (Cody-Waite), ``exp(r)`` by Cephes' ``expf``
    polynomial (about 1 ulp in float32), ``2^k`` written as a float's exponent bits (as an integer-valued float, then
    converted, so that no 64-bit integer arithmetic stops the vectorization); ``x`` clamped to [-87, 88], beyond
    which the sigmoid is 0 or 1 in float32, and ``y < -88`` gives 0 as torch's underflow does. NaN stays NaN (no
    comparison above is true for it). Held to torch's SiLU by ``tests/test_network_numpy.py``."""
    flat = Y.reshape(-1)
    bits = np.empty(flat.size, np.int32)
    poly = np.empty(flat.size, np.float32)
    for i in range(flat.size):
        x = -flat[i]
        x = np.float32(88.0) if x > np.float32(88.0) else (np.float32(-87.0) if x < np.float32(-87.0) else x)
        k = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
        r = x - k * np.float32(0.693359375) - k * np.float32(-2.12194440e-4)
        p = ((((np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)) * r + np.float32(8.3334519073e-3)) * r
              + np.float32(4.1665795894e-2)) * r + np.float32(1.6666665459e-1)) * r + np.float32(5.0000001201e-1)
        poly[i] = p * r * r + r + np.float32(1.0)
        bits[i] = np.int32((k + np.float32(127.0)) * np.float32(8388608.0))  # (k + 127) << 23
    scale = bits.view(np.float32)
    for i in range(flat.size):
        y = flat[i]
        flat[i] = np.float32(0.0) if y < np.float32(-88.0) else y / (np.float32(1.0) + poly[i] * scale[i])


@njit(cache=True, fastmath=_FAST)
def _layer_norm(Y, P, norm, eps):
    """``Y <- LayerNorm(Y)`` row by row, weight at ``P[norm:]``, bias after it (float32 sums, as torch's CPU kernel)."""
    n = Y.shape[1]
    w, b = P[norm:norm + n], P[norm + n:norm + 2 * n]
    for r in range(Y.shape[0]):
        y = Y[r]
        mean = np.float32(0.0)
        for j in range(n):
            mean += y[j]
        mean /= np.float32(n)
        var = np.float32(0.0)
        for j in range(n):
            var += (y[j] - mean) * (y[j] - mean)
        inv = np.float32(1.0) / np.sqrt(var / np.float32(n) + eps)
        for j in range(n):
            y[j] = (y[j] - mean) * inv * w[j] + b[j]


@njit(cache=True, fastmath=_FAST)
def _mlp(P, LT, MT, eps, k, X):
    """[R, out] float32: MLP ``k`` of the rows ``X`` [R, in] (float32, C-contiguous), one matrix product (BLAS) per
    layer: W [out, in] at ``P[w:]`` in torch's layout, b at ``P[b:]``."""
    first, count, norm = MT[k, 0], MT[k, 1], MT[k, 2]
    Y = X
    for layer in range(count):
        w, b, n_in, n_out = LT[first + layer, 0], LT[first + layer, 1], LT[first + layer, 2], LT[first + layer, 3]
        Y = np.dot(Y, P[w:w + n_in * n_out].reshape((n_out, n_in)).T)
        bias = P[b:b + n_out]
        for r in range(Y.shape[0]):
            y = Y[r]
            for j in range(n_out):
                y[j] += bias[j]
        if layer < count - 1:
            _silu(Y)
    if norm >= 0:
        _layer_norm(Y, P, norm, eps[k])
    return Y


@njit(cache=True, fastmath=_FAST)
def _normalized(F, cols, stats, out, at):
    """``out[:, at:at + len(cols)]`` = the columns ``cols`` of ``F`` normalized by ``stats`` [2, F] (mean, std)."""
    for i in range(F.shape[0]):
        for j in range(cols.shape[0]):
            c = cols[j]
            out[i, at + j] = (F[i, c] - stats[0, c]) / stats[1, c]


@njit(cache=True, fastmath=_FAST)
def network(ef, nf, hist, edge_index, edge_stats, node_stats, hist_stats, config_index, roles, P, LT, MT,
            eps):
    """(o_k [E], o [E, D]) float32, the raw outputs of ``ContactLawGNN.law_parameters``'s stiffness MLP and decoder, of
    raw features ``ef`` [E, 41], ``nf`` [N, 9], ``hist`` [E, 4] or [E, 0] (float32, normalized here by the (mean,
    std) rows of ``*_stats`` [2, F]): the stiffness MLP reads the columns ``config_index`` of the edge features, the
    edge encoder all of them then the history. ``roles`` [4 + 2 steps]: the MLP indices of stiffness, edge encoder,
    node encoder, decoder, then each message-passing step's edge and node MLP (-1: none, as in the last step)."""
    E, N = ef.shape[0], nf.shape[0]
    X = np.empty((E, config_index.shape[0]), np.float32)
    _normalized(ef, config_index, edge_stats, X, 0)
    o_k = _mlp(P, LT, MT, eps, roles[0], X)[:, 0].copy()
    X = np.empty((E, ef.shape[1] + hist.shape[1]), np.float32)
    _normalized(ef, np.arange(ef.shape[1]), edge_stats, X, 0)
    _normalized(hist, np.arange(hist.shape[1]), hist_stats, X, ef.shape[1])
    e = _mlp(P, LT, MT, eps, roles[1], X)
    X = np.empty((N, nf.shape[1]), np.float32)
    _normalized(nf, np.arange(nf.shape[1]), node_stats, X, 0)
    x = _mlp(P, LT, MT, eps, roles[2], X)
    H = e.shape[1]
    cat_e, cat_x = np.empty((E, 3 * H), np.float32), np.empty((N, 3 * H), np.float32)
    for step in range((roles.shape[0] - 4) // 2):
        for i in range(E):  # the edge update reads [e, x_sender, x_receiver] (``InteractionLayer.edge_update``)
            s, d = edge_index[0, i], edge_index[1, i]
            for j in range(H):
                cat_e[i, j], cat_e[i, H + j], cat_e[i, 2 * H + j] = e[i, j], x[s, j], x[d, j]
        e = e + _mlp(P, LT, MT, eps, roles[4 + 2 * step], cat_e)
        if roles[5 + 2 * step] < 0:
            continue
        cat_x[:, :H] = x  # the node update reads [x, sum of new edge latents in, sum out]
        cat_x[:, H:] = 0.0
        for i in range(E):
            s, d = edge_index[0, i], edge_index[1, i]
            for j in range(H):
                cat_x[d, H + j] += e[i, j]
                cat_x[s, 2 * H + j] += e[i, j]
        x = x + _mlp(P, LT, MT, eps, roles[5 + 2 * step], cat_x)
    return o_k, _mlp(P, LT, MT, eps, roles[3], e)
