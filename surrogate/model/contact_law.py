"""Contact model v2: a graph network that outputs bounded corrections of a passive contact law.

    contact graph --features--> normalizers --+--> stiffness MLP (configuration features only) --> o_k [E]
                                              +--> encode-process-decode GNN (all features) ------> o_c, o_mu [E]
    k  = k*  F0 / L^p * exp(s_k  tanh(o_k))        stiffness: a function of configuration only
    c  = c*  / V      * exp(s_c  tanh(o_c))        Hunt-Crossley damping >= 0
    mu = min(mu* exp(s_mu tanh(o_mu)), mu_max)     friction coefficient > 0
    forces = the law (``surrogate.model.law``) solved semi-implicitly with these parameters

(k*, c*, mu*) is the global prior law (``LawPrior``; learnable log-parameters, fitted first on
rollouts), one per contact group: contacts with static surfaces (ground, table) and with moving
bodies (fingertip pads) are different materials. With ``units: si`` the prior is in N/m^p, s/m
(F0 = L = V = 1 above): a pad squeezes every object with the same law. The heads' last layers start at zero, so an untrained model *is* the prior law. The
corrections are bounded (factor e^s at most), and whatever the network outputs the force is the
law's: zero at separation, a spring on penetration whose elastic part depends on configuration
only, damping and friction that only dissipate. ``corrections=False`` builds no network: the
constant law with learnable global parameters (the prior's own row in the benchmarks).

The learned core sees only nondimensional features (``surrogate.model.graph``: lengths in the
object size L, velocities in V = sqrt(|g| L), forces in F0 = m |g|) through running normalizers
that are buffers of the model (so of the checkpoint).

Graph fields used beyond ``surrogate.model.graph``'s: ``inertia_w`` [B, 3, 3] (the object's
inertia about its COM in world axes) and ``dt`` [B] (the physics step), which the semi-implicit
solve needs; ``surrogate.model.batch_graph.GraphBuilder`` (the stepper's and the twin's graphs) provides them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import graph as G
from .history import ContactState
from .joint_solve import Spin, solve_free_object
from .law import LawPrior, patch_law, point_law, spin_law, spin_slip
from .law_numpy import NumpyLaw
from .layers import InteractionLayer, Normalizer, mlp
from .presliding import contact_state_after, with_presliding

# Features that do not depend on any velocity: the stiffness head only sees these, so the
# elastic force is a function of configuration alone.
_VELOCITY_EDGE = {"vn", "vt", "wn", "wt", "vt_dot_rt", "vt_cross_rt", "gt_dot_vt", "gt_cross_vt"}
CONFIG_EDGE_INDEX = tuple(i for i, n in enumerate(G.EDGE_FEATURES) if n not in _VELOCITY_EDGE)


def _zero_last(seq: nn.Sequential) -> None:
    last = [m for m in seq if isinstance(m, nn.Linear)][-1]
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)


GROUPS = ("surface", "body")  # the other side of a contact: a static surface (ground, table) or a moving body (a pad)


class ContactLawGNN(NumpyLaw, nn.Module):
    """Per-contact forces of a passive law whose parameters a graph network corrects.

    Args:
      prior: ``LawPrior`` fields (dict) of the initial global law of contacts with static surfaces (ground, table);
        ``prior_body``: of contacts with moving bodies (fingertip pads), default the same. Both in the same ``units``.
      corrections: build the networks (False: the constant laws only).
      hidden, steps, mlp_layers: GNN width, message-passing steps, linear layers per MLP.
      bounds: (s_k, s_c, s_mu) log-bounds of the corrections. mu_max: upper bound of the friction coefficient.
      friction_iterations: re-linearizations of friction at the solved state (0: one linearization at the start of
        the step, as the capture rig; ``joint_solve.solve_free_object`` explains why more are closer to Coulomb: a
        landing point keeps mu times its solved normal force). The twin and the hybrid stepper
        (``joint_solve.solve_joint``, ``sim.law_kernel``) both iterate; the cube release uses 4.
      stribeck: a static/kinetic friction law (``law.friction_coefficient``): two more global parameters per group,
        the prior's ``static_friction`` (static / kinetic ratio) and ``stribeck_speed``, fitted with the others in the
        prior stage (False: Coulomb with one coefficient, the prior's ``static_friction`` must be 1).
      history: the network (with ``corrections``) also sees each contact's history (``graph.HISTORY_FEATURES``, from
        the state ``model.history`` carries across steps). With the presliding spring (a prior
        ``presliding_stiffness`` > 0 for a group: on for the groups whose prior has one, with or without ``history``)
        a fourth bounded head scales its stiffness k_z; without one the network sees the time under load and the last
        normal force (the displacement features are zero) and corrects the spring-free law, which a prior without any
        builds exactly as before the spring. presliding_bound: s_z, the log-bound of the k_z correction.
      members: an ensemble of this many networks of the same architecture on one law, their log-corrections averaged
        (``model.ensemble``): each bounded, so the mean is too. 1: one network, the model before ensembles bit for bit.

    Torsional and rolling friction (``law.spin_law``) are on for the groups whose prior has a ``torsional_friction``
    or ``rolling_friction`` > 0 (learnable log-parameters, 0 exactly for the others); with ``corrections`` a further
    bounded head (log-bound ``s_mu``) scales both per contact. Off: the law before them, bit for bit.
    ``friction_ellipse``: in the groups with torsional friction each pad-object pair's points act as one patch at
    their centre (``patch``) whose friction and torsion share one elliptic limit (``law.patch_law``), the prior's
    ``torsional_friction`` its length ``e`` (the largest torque is ``mu f_n e``).
    """

    graph_dtype = torch.float64  # the stepper builds float64 graphs for the semi-implicit solve

    def __init__(self, *, prior: dict | None = None, prior_body: dict | None = None, corrections: bool = True,
                 hidden: int = 32, steps: int = 2, mlp_layers: int = 2, bounds=(2.0, 2.0, 1.0), mu_max: float = 2.0,
                 friction_iterations: int = 0, stribeck: bool = False, history: bool = False,
                 presliding_bound: float = 2.0, friction_ellipse: bool = False, members: int = 1):
        super().__init__()
        ps = LawPrior.from_json(prior or {})
        pb = LawPrior.from_json(prior_body) if prior_body is not None else ps
        if pb.units != ps.units or pb.exponent != ps.exponent or pb.slip_eps != ps.slip_eps:
            raise ValueError("prior and prior_body must share units, exponent and slip_eps")
        self._hparams = dict(corrections=bool(corrections), hidden=int(hidden), steps=int(steps),
                             mlp_layers=int(mlp_layers), bounds=[float(b) for b in bounds], mu_max=float(mu_max),
                             friction_iterations=int(friction_iterations), stribeck=bool(stribeck))
        self.friction_iterations = int(friction_iterations)
        self.exponent, self.slip_eps, self.units, self.mu_max = ps.exponent, ps.slip_eps, ps.units, float(mu_max)
        self.bounds = tuple(float(b) for b in bounds)
        log = lambda name: nn.Parameter(torch.tensor([math.log(getattr(ps, name)), math.log(getattr(pb, name))]))  # noqa: E731
        self.log_stiffness, self.log_damping, self.log_friction = log("stiffness"), log("damping"), log("friction")
        self.stribeck = bool(stribeck)
        if self.stribeck:
            self.log_static_friction, self.log_stribeck_speed = log("static_friction"), log("stribeck_speed")
        elif ps.static_friction != 1.0 or pb.static_friction != 1.0:
            raise ValueError("a static_friction other than 1 needs stribeck=True (a static/kinetic friction law)")
        kz = torch.tensor([ps.presliding_stiffness, pb.presliding_stiffness], dtype=torch.float32)
        self.presliding = bool((kz > 0).any())  # the spring (presliding.presliding_start); off: the law before it, bit for bit
        if self.presliding:
            # a group whose prior has no spring keeps none (k_z = 0 exactly), the others a learnable log k_z
            self.register_buffer("presliding_on", kz > 0, persistent=False)
            self.log_presliding = nn.Parameter(torch.where(kz > 0, kz, torch.ones_like(kz)).log())
        spin = torch.tensor([[ps.torsional_friction, pb.torsional_friction],
                             [ps.rolling_friction, pb.rolling_friction]], dtype=torch.float32)
        self.spin = bool((spin > 0).any())  # torsional and rolling friction (law.spin_law)
        if self.spin:  # [2 (torsion, rolling), 2 groups]: a term whose prior is 0 stays 0 exactly
            self.register_buffer("spin_on", spin > 0, persistent=False)
            self.log_spin = nn.Parameter(torch.where(spin > 0, spin, torch.ones_like(spin)).log())
        if history or presliding_bound != 2.0:
            self._hparams.update(history=bool(history), presliding_bound=float(presliding_bound))
        # the pads' points as one patch whose friction and torsion share one limit (law.patch_law): for the groups
        # with torsional friction, whose torsional_friction is then the patch's length e
        self.ellipse = bool(friction_ellipse)
        if self.ellipse:
            if not (self.spin and bool(self.spin_on[0].any())):
                raise ValueError("friction_ellipse needs a torsional_friction > 0 (the patch's length e, m) in a prior")
            self._hparams["friction_ellipse"] = True
        # without corrections there is no network to see the history (the prior stage of a history model): the law
        self.history = bool(history) and bool(corrections)
        self.presliding_bound = float(presliding_bound)
        nE, nN = len(G.EDGE_FEATURES), len(G.NODE_FEATURES)
        self.edge_norm, self.node_norm = Normalizer(nE), Normalizer(nN)
        self.register_buffer("config_index", torch.tensor(CONFIG_EDGE_INDEX, dtype=torch.long), persistent=False)
        self.corrections = bool(corrections)
        if self.corrections:
            self.stiffness_mlp = mlp(len(CONFIG_EDGE_INDEX), hidden, 1, mlp_layers, layer_norm=False)
            nH = len(G.HISTORY_FEATURES) if self.history else 0
            if self.history:  # their own normalizer: the 41 edge features' (and the input-range check) unchanged
                self.hist_norm = Normalizer(nH)
            self.edge_enc = mlp(nE + nH, hidden, hidden, mlp_layers)
            self.node_enc = mlp(nN, hidden, hidden, mlp_layers)
            self.layers = nn.ModuleList([InteractionLayer(hidden, mlp_layers, update_nodes=k < steps - 1)
                                         for k in range(steps)])
            self.decoder = mlp(hidden, hidden, 2 + int(self.history and self.presliding) + int(self.spin), mlp_layers,
                               layer_norm=False)
            _zero_last(self.stiffness_mlp)
            _zero_last(self.decoder)
        # an ensemble (``model.ensemble``): members - 1 more networks on this law, their corrections averaged
        if int(members) != 1 and not (self.corrections and 1 < int(members) <= 16):
            raise ValueError(f"members must be 1, or 2-16 with corrections, got {members!r}")
        self.extra = nn.ModuleList([ContactLawGNN(prior=prior, prior_body=prior_body, **self._hparams)
                                    for _ in range(int(members) - 1)])
        if self.extra:
            self._hparams["members"] = int(members)

    @property
    def hparams(self) -> dict:
        """Constructor arguments that rebuild this model, with the *fitted* priors (what a card records)."""
        return {"prior": self.prior("surface").to_json(), "prior_body": self.prior("body").to_json(), **self._hparams}

    # -- parameters --------------------------------------------------------------------------
    def prior(self, group: str = "surface") -> LawPrior:
        """The current global law of one contact group (fitted values)."""
        i = GROUPS.index(group)
        with torch.no_grad():
            extra = {"static_friction": float(self.log_static_friction[i].exp()),
                     "stribeck_speed": float(self.log_stribeck_speed[i].exp())} if self.stribeck else {}
            if self.presliding and bool(self.presliding_on[i]):
                extra["presliding_stiffness"] = float(self.log_presliding[i].exp())
            for j, name in enumerate(("torsional_friction", "rolling_friction")):
                if self.spin and bool(self.spin_on[j, i]):
                    extra[name] = float(self.log_spin[j, i].exp())
            return LawPrior(stiffness=float(self.log_stiffness[i].exp()), exponent=self.exponent,
                            damping=float(self.log_damping[i].exp()), friction=float(self.log_friction[i].exp()),
                            slip_eps=self.slip_eps, units=self.units, **extra)

    def prior_parameters(self) -> list[nn.Parameter]:
        extra = [self.log_static_friction, self.log_stribeck_speed] if self.stribeck else []
        extra += [self.log_presliding] if self.presliding else []
        extra += [self.log_spin] if self.spin else []
        return [self.log_stiffness, self.log_damping, self.log_friction] + extra

    @property
    def members(self) -> list[ContactLawGNN]:
        """The networks whose corrections are averaged: this one, then an ensemble's others (their priors unused)."""
        return [self, *self.extra]

    def correction_parameters(self) -> list[nn.Parameter]:
        prior = {id(p) for m in self.members for p in m.prior_parameters()}
        return [p for p in self.parameters() if id(p) not in prior]

    def features(self, g, vel=None, omega=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's raw inputs: (edge [E, 41], node [N, 9]) float32 features (``surrogate.model.graph``),
        before the normalizers; a caller that checks them (the stepper's input range) passes them back."""
        return G.edge_features(g, vel, omega).float(), G.node_features(g, vel, omega).float()

    def history_features(self, g, vel=None, omega=None, state: ContactState | None = None) -> torch.Tensor:
        """[E, 4] float32 history features (``graph.history_features``) of the contacts' ``state`` (zero: fresh)."""
        E = g.edge_index.shape[1]
        if state is None:
            z, age, fn = g.normal.new_zeros(E, 3), g.normal.new_zeros(E), g.normal.new_zeros(E)
        else:
            z, age, fn = (torch.as_tensor(x, dtype=g.normal.dtype) for x in state[:3])
        return G.history_features(g, z, age, fn, vel, omega).float()

    def law_parameters(self, g, vel=None, omega=None, *, features=None, state: ContactState | None = None) -> torch.Tensor:
        """[E, 3] (k, c, mu) of every contact in the prior's units: the group's prior times the bounded corrections;
        then k_z with the presliding spring on (0 for a group without one), then (mu_spin, mu_roll) with ``spin``
        (``spin_columns``; 0 for a term off in the contact's group).

        ``features``: ``self.features(g, vel, omega)`` if the caller has them already. ``state``: the contacts'
        ``history.ContactState`` (z in world axes; None: fresh contacts), which a model with ``history`` sees."""
        group = (g.static[g.edge_index[0]] < 0.5).long()  # 0: a static surface, 1: a moving body
        cols = [self.log_stiffness[group], self.log_damping[group], self.log_friction[group]]
        if self.presliding:
            cols.append(self.log_presliding[group])
        if self.spin:
            cols += [self.log_spin[0, group], self.log_spin[1, group]]
        base = torch.stack(cols, dim=1)

        def spring_off(out):  # k_z, mu_spin, mu_roll = 0 exactly for a group whose prior has none
            if self.presliding:
                out = torch.cat([out[:, :3], torch.where(self.presliding_on[group], out[:, 3], 0.0)[:, None],
                                 out[:, 4:]], dim=1)
            if self.spin:
                j = self.spin_columns[0]
                out = torch.cat([out[:, :j], torch.where(self.spin_on[:, group].T, out[:, j:], 0.0)], dim=1)
            return out

        # in float64, as the numpy path (``law_numpy``): the twin and the stepper agree to rounding
        if not self.corrections and not self.training:
            return spring_off(base.double().exp())  # no features needed (in training they fill the normalizers)
        ef, nf = self.features(g, vel, omega) if features is None else features
        if not self.corrections:
            self.edge_norm(ef), self.node_norm(nf)  # in training the features fill the normalizers
            return spring_off(base.double().exp())
        # the mean of bounded log-corrections is bounded alike: an ensemble is as passive as each member
        corr = torch.stack([m.log_corrections(g, vel, omega, features=(ef, nf), state=state)
                            for m in self.members]).double().mean(0)
        out = (base.double() + corr).exp()
        return spring_off(torch.cat([out[:, :2], out[:, 2:3].clamp_max(self.mu_max), out[:, 3:]], dim=1))

    def log_corrections(self, g, vel=None, omega=None, *, features, state: ContactState | None = None) -> torch.Tensor:
        """[E, C] float32 bounded log-corrections of this network alone (the columns of ``law_parameters``), from the
        raw ``features`` (its own normalizers applied here)."""
        ef, nf = self.edge_norm(features[0]), self.node_norm(features[1])
        s_k, s_c, s_mu = self.bounds
        o_k = self.stiffness_mlp(ef[:, self.config_index])[:, 0]  # configuration only: never the history
        e_in = ef
        if self.history:
            e_in = torch.cat([e_in, self.hist_norm(self.history_features(g, vel, omega, state))], dim=1)
        e = self.edge_enc(e_in)
        x = self.node_enc(nf)
        for layer in self.layers:
            x, e = layer(x, g.edge_index, e)
        o = self.decoder(e)
        corr = [s_k * torch.tanh(o_k), s_c * torch.tanh(o[:, 0]), s_mu * torch.tanh(o[:, 1])]
        if self.history and self.presliding:
            corr.append(self.presliding_bound * torch.tanh(o[:, 2]))
        elif self.presliding:
            corr.append(torch.zeros_like(o_k))
        if self.spin:  # one head scales torsion and rolling alike
            corr += [s_mu * torch.tanh(o[:, -1])] * 2
        return torch.stack(corr, dim=1)

    @property
    def patch(self) -> tuple[np.ndarray, float] | None:
        """With ``friction_ellipse``: ([2] bool, the (surface, body) groups whose contacts of one object-other body
        pair act as one patch at their centre, the exponent p that weights them: ``GraphBuilder.build``'s ``patch``);
        else None."""
        return (self.spin_on[0].numpy().copy(), self.exponent) if self.ellipse else None

    @property
    def spin_columns(self) -> tuple[int, int]:
        """The columns of (mu_spin, mu_roll) in ``law_parameters`` (with ``spin``)."""
        j = 3 + int(self.presliding)
        return j, j + 1

    # -- forces ------------------------------------------------------------------------------
    def forward(self, g, vel=None, omega=None) -> torch.Tensor:
        """[E, 3] contact forces on the object (world axes, N, float64); ``vel``/``omega`` override node velocities."""
        return self.solve(g, vel, omega)[0]

    def law_terms(self, g, vel=None, omega=None, *, features=None, state: ContactState | None = None,
                  contact_vel: tuple | None = None) -> dict:
        """The linearized law of every contact (float64): ``f0, a, b`` [E] (``law.point_law``), the normal
        ``n`` [E, 3], ``u_oth`` [E, 3] the other body's point velocity, ``w0`` [E, 3] the elastic force; with the
        presliding spring on (``presliding.with_presliding``: its terms are in ``w0``, ``a`` and ``b``) also ``kz`` [E]
        (N/m), ``z`` [E, 3] the displacement the step starts from and ``a_spring`` [E] (else None); with ``spin``
        ``spin`` (``joint_solve.Spin``, ``Jw`` None: the solver's to make) holds torsion and rolling (else None); the
        solve of the step uses them. ``state``: the contacts' ``history.ContactState`` (z in world axes; None: fresh).
        ``contact_vel``: ``(u_obj, u_oth, w_obj, w_oth)`` [E, 3] each, the point and angular velocity of each contact's
        object side and other side, where the object node's twist is not every contact's (the links of an articulated
        object: ``sim.twin_links``); None: from the node velocities.
        (The hybrid stepper solves them with MuJoCo's full mobility, hand included: ``sim.law_solve``.)"""
        vel = (g.vel if vel is None else vel).double()
        omega = (g.omega if omega is None else omega).double()
        s, o = g.edge_index
        eg = G._edge_graph(g)
        prm = self.law_parameters(g, vel, omega, features=features, state=state).double()
        L, V, F0 = (u.double()[eg] for u in G.units(g))
        size = L  # the object's size (m) in any units: the scale of the angular regularization
        if self.units == "si":
            L, V, F0 = torch.ones_like(L), torch.ones_like(V), torch.ones_like(F0)
        p = self.exponent
        n = g.normal.double()
        if contact_vel is None:
            u_obj = vel[o] + torch.cross(omega[o], g.r_obj.double(), dim=-1)
            u_oth = vel[s] + torch.cross(omega[s], g.r_oth.double(), dim=-1)
            w_obj, w_oth = omega[o], omega[s]
        else:
            u_obj, u_oth, w_obj, w_oth = contact_vel
        v = u_obj - u_oth
        vn = (v * n).sum(-1)
        vt = v - vn[:, None] * n
        speed = torch.sqrt((vt * vt).sum(-1) + 1e-30)
        mu, eps = prm[:, 2], self.slip_eps * V
        if self.stribeck:  # [E, 3] (mu_k, r, v_s): law.friction_coefficient
            group = (g.static[s] < 0.5).long()
            mu = torch.stack([mu, self.log_static_friction[group].double().exp(),
                              self.log_stribeck_speed[group].double().exp() * V], dim=-1)
        dt = g.dt.double()[eg]
        f0, a, b, fn = point_law(-g.dist.double(), vn, speed, k=prm[:, 0] * F0 / L ** p, p=p, c=prm[:, 1] / V, mu=mu,
                                 eps=eps, dt=dt)
        out = {"f0": f0, "a": a, "b": b, "n": n, "u_oth": u_oth, "mu": mu, "eps": eps, "w0": f0[:, None] * n,
               "kz": None, "z": None, "a_spring": None, "spin": None}
        if self.spin:  # torsion and rolling: lengths in L (weight units) or m
            i, j = self.spin_columns
            mu_spin, mu_roll, eps_w = prm[:, i] * L, prm[:, j] * L, eps / size
            w_n, w_t2 = spin_slip(w_obj - w_oth, n)
            if self.ellipse:  # the tangential damping from the patch's limit: the normal damping a + b kept
                a_e, a_w, b_w = patch_law(fn, mu, speed * speed, w_n, w_t2, e=mu_spin, mu_roll=mu_roll, eps=eps,
                                          eps_w=eps_w)
                a, b = a_e, b + a - a_e
                out["a"], out["b"] = a, b
            else:
                a_w, b_w = spin_law(fn, w_n, w_t2, mu_spin=mu_spin, mu_roll=mu_roll, eps_w=eps_w)
            out["spin"] = Spin(None, a_w, b_w, mu_spin, mu_roll, eps_w, w_oth, self.ellipse)
        if self.presliding:
            kz = prm[:, 3] * F0 / L
            z, k_last = ((n.new_zeros(len(f0), 3), None) if state is None else
                         (torch.as_tensor(state.z, dtype=n.dtype), torch.as_tensor(state.k_last, dtype=n.dtype)))
            out["w0"], out["a"], out["b"], out["a_spring"], out["z"] = with_presliding(
                f0, a, b, n, fn, mu, speed * speed, kz, z, k_last, dt)
            out["kz"] = kz
        return out

    def solve(self, g, vel=None, omega=None, *, state: ContactState | None = None, with_state: bool = False,
              with_torque: bool = False):
        """(forces [E, 3], end-of-step object twist [B, 6]) of the semi-implicit law for the free object
        against kinematic other bodies (``joint_solve.solve_free_object``; float64). The twin trains through this.
        ``with_torque``: forces [E, 6], each contact's force and its torque about the contact point (N m; torsional
        and rolling friction, ``spin``; zero without).

        ``state``: the contacts' ``history.ContactState`` (z in world axes; None: fresh contacts). ``with_state``:
        also return the contacts' state after the step (``presliding.contact_state_after``; torch, z in world axes)."""
        vel = (g.vel if vel is None else vel).double()
        omega = (g.omega if omega is None else omega).double()
        obj = g.object_index
        eg = G._edge_graph(g)
        if eg.numel():
            t = self.law_terms(g, vel, omega, state=state)
        else:
            z = vel.new_zeros(0)
            t = {"f0": z, "a": z, "b": z, "n": vel.new_zeros(0, 3), "u_oth": vel.new_zeros(0, 3),
                 "mu": vel.new_zeros(0, 3) if self.stribeck else z, "eps": z, "w0": vel.new_zeros(0, 3),
                 "kz": None, "z": None, "a_spring": None, "spin": None}
        r_obj = g.r_obj.double()
        wrench, xi = solve_free_object(t["w0"], t["a"], t["b"], t["n"], r_obj, t["u_oth"], eg, vel=vel[obj],
                                       omega=omega[obj], mass=g.mass_ref.double(), inertia_w=g.inertia_w.double(),
                                       gravity=g.gravity.double(), dt=g.dt.double(), num_envs=obj.shape[0], mu=t["mu"],
                                       eps=t["eps"], iterations=self.friction_iterations, a_spring=t["a_spring"],
                                       spin=t["spin"])
        forces = wrench[:, :3]
        if with_torque and wrench.shape[1] == 3:
            wrench = torch.cat([wrench, torch.zeros_like(wrench)], dim=1)
        out = wrench if with_torque else forces
        if not with_state:
            return out, xi
        E = len(eg)
        if t["kz"] is None:  # no spring: only the force and the time under load
            zero = forces.new_zeros(E)
            z, kz = forces.new_zeros(E, 3), zero
        else:
            z, kz = t["z"], t["kz"]
        xe = xi[eg]
        u = xe[:, :3] + torch.cross(xe[:, 3:], r_obj, dim=-1) - t["u_oth"]  # the solved end-of-step slip
        age = forces.new_zeros(E) if state is None else torch.as_tensor(state.age, dtype=forces.dtype)
        z_end, age_end, fn_end = contact_state_after(z, u, t["n"], kz, t["mu"], forces, age, g.dt.double()[eg])
        return out, xi, ContactState(z_end, age_end, fn_end, kz)

