"""The training config's defaults for ``model.kind: gns`` (the end-to-end peer), in one place: ``training.config``
fills a config from these, ``training.keys`` checks its keys against them, ``gns_data`` and ``gns_lightning`` read
them. The model's keys are ``GNSNet``'s arguments."""

from __future__ import annotations

from ..learn.defaults import TRAINER_DEFAULTS

GNS_DEFAULTS = {"seed": 0, "out_dir": "runs/train", "threads": 1, "data": {}, "model": {}, "loss": {}, "optim": {},
                "trainer": {"max_epochs": 30, **TRAINER_DEFAULTS}, "export": {"dir": None, "release_dir": None}}
# data: the captures, the split, the history window's start (init_frames), batch size, subsets
DATA_DEFAULTS = dict(root=None, bench_split=None, val_fraction=0.2, val_min=50, split_seed=0, init_frames=5,
                     batch_size=64, max_episodes=None, max_train_episodes=None, max_val_episodes=None)
# loss: input noise (in the normalized units), symmetry augmentation, rotation weight of the validation score
LOSS_DEFAULTS = dict(noise_std=3e-4, symmetry_augment=True, rot_weight_val=0.0)
OPTIM_DEFAULTS = dict(lr=1e-3, weight_decay=0.0, final_lr_fraction=0.05)
