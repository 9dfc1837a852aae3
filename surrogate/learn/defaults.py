"""The training config's defaults for ``model.kind: law`` (the default kind), in one place.

``training.config`` fills a config from these, ``training.keys`` checks its keys against them and the modules that
train (``learn.lightning``, ``learn.fit``) read them; a key's meaning is documented here and in ``docs/training.md``.
The model's own keys (``model.*``) are the arguments of ``ContactLawGNN`` (their defaults are its constructor's); the
end-to-end peer's defaults are in ``baselines.gns_defaults``.
"""

from __future__ import annotations

# trainer: Lightning's Trainer arguments (any other Trainer argument is accepted too)
TRAINER_DEFAULTS = {"accelerator": "cpu", "devices": 1, "strategy": "auto", "deterministic": True,
                    "log_every_n_steps": 20, "enable_progress_bar": True}

# the top level: seed, output folder, torch threads, and where the checkpoints are exported
LAW_DEFAULTS = {"seed": 0, "out_dir": "runs/train", "threads": 1, "data": {}, "model": {}, "loss": {}, "stages": {},
                "trainer": dict(TRAINER_DEFAULTS),
                "export": {"dir": None, "release_dir": None, "prior_dir": None, "network_dir": None}}

# data: the captures (root), the split (val_fraction, val_min, split_seed, val_split: episode | object | family,
# bench_split), the scene (margin m, substeps per frame), the training windows (window_frames, window_stride,
# detach_every, init_frames, batch_size), subsets (max_*), how the hand moves in training (hand: kinematic | actuated)
# and in validation (val_hand; null: as hand)
DATA_DEFAULTS = dict(root=None, val_fraction=0.2, val_min=50, split_seed=0, bench_split=None, margin=0.02, substeps=4,
                     window_frames=64, window_stride=32, detach_every=0, init_frames=5, batch_size=32, max_episodes=None,
                     max_train_episodes=None, max_val_episodes=None, hand="kinematic", val_hand=None,
                     val_split="episode")

# loss: rotation weight (degrees against % of size) in training and in the validation score; pad force weight
LOSS_DEFAULTS = dict(rot_weight=0.5, rot_weight_val=0.5, force_weight=0.0)

# the prior parameters a grid can scan (static_friction, stribeck_speed: models with model.stribeck)
GRID_KEYS = ("stiffness", "damping", "friction", "static_friction", "stribeck_speed")
# grid: empty lists are off; max_episodes scores the grid on the first that many training episodes (null: all)
STAGE_DEFAULTS = {"grid": {"group": "surface", **{k: [] for k in GRID_KEYS}, "max_episodes": None},
                  # patience: stop a stage after this many validated epochs without a better whole-episode validation
                  # score (early stopping; null: run every epoch). The best epoch is kept either way.
                  "prior": {"epochs": 8, "lr": 0.05, "final_lr_fraction": 0.1, "patience": None},
                  "corrections": {"epochs": 6, "lr": 1e-3, "final_lr_fraction": 0.1, "patience": None},
                  # run after this fit by the training layer (it replays through the benchmarks' replays,
                  # surrogate.bench.law_selection): the pad friction chosen by closed-loop replays of this
                  # many validation episodes with a hand (0: off), over these scales of the fitted value
                  "closed_loop": {"episodes": 0, "friction_scales": [1.0, 0.8, 0.63, 0.5, 0.4], "reference": None,
                                  # the hand's latency the replays delay the commands by, as rig-grasp replays the
                                  # learned rows: identify (on 8 training episodes' hand joints), seconds, or 0
                                  "command_delay": "identify",
                                  # network or law decided, and the pad friction chosen, on this capture dataset's
                                  # grasps (objects the training never saw) instead of the validation episodes: by
                                  # object, position decision_horizon_s after the close starts, as rig-grasp scores
                                  "decision_data": None, "decision_horizon_s": 1.0}}

# preset: the defaults of one kind of captures, between the defaults above and the config file (the file and --set
# override it), so that a config names its captures and little else. The releases' recipes are these presets.
PRESETS = {
    # free objects tossed onto the ground (the ContactNets cube): whole tosses from frame 0, as the benchmarks roll
    # them out (on cube-real's validation tosses, val_score: whole tosses truncated every 32 frames 17.10 against
    # 18.0-19.6 for 64-frame windows every 32 frames); static/kinetic friction (r = 0.4 on the cube: friction that
    # strengthens with slip speed) re-linearized at impacts, converged by 4 (score 18.40 / 17.40 / 17.16 / 17.14 at
    # 1 / 2 / 4 / 6 iterations; linearized once, a landing corner's friction is its first-touch graze's)
    "tosses": {"data": {"margin": 0.02, "window_frames": 0, "window_stride": 0, "detach_every": 32, "batch_size": 8},
               "model": {"stribeck": True, "friction_iterations": 4},
               "loss": {"rot_weight": 0.25, "rot_weight_val": 0.25},
               "stages": {"prior": {"lr": 0.03}, "corrections": {"epochs": 2}},
               "trainer": {"gradient_clip_val": 1.0, "log_every_n_steps": 5}},
    # grasps with fingertip force sensors (the capture rig): windows of approach, lift and shake; the pads' sensors
    # in the loss; SI laws (a pad squeezes every object with the same law); early stopping; the pad friction chosen
    # by closed-loop replays of validation episodes with the hand actuated (bench.law_selection)
    "grasps": {"data": {"margin": 0.005, "window_frames": 64, "window_stride": 120, "batch_size": 16},
               "model": {"prior": {"stiffness": 1.0e6, "exponent": 1.5, "damping": 5.0, "friction": 0.8,
                                   "slip_eps": 1.0e-4, "units": "si"},
                         "prior_body": {"stiffness": 1.0e5, "exponent": 1.5, "damping": 5.0, "friction": 1.0,
                                        "slip_eps": 1.0e-4, "units": "si"}},
               "loss": {"rot_weight": 0.25, "rot_weight_val": 0.25, "force_weight": 0.5},
               "stages": {"prior": {"epochs": 3, "patience": 1}, "corrections": {"epochs": 8, "patience": 2},
                          "closed_loop": {"episodes": 24, "friction_scales": [1.0, 0.8, 0.63, 0.5]}},
               "trainer": {"gradient_clip_val": 1.0, "log_every_n_steps": 10}},
}
