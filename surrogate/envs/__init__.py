"""Gymnasium environments: grasp and lift an object with MuJoCo physics and analytic or learned contact.

Importing this package registers (``gymnasium.make`` / ``gymnasium.make_vec``)::

    ContactSurrogate/GripperGrasp-v0   parallel-jaw gripper
    ContactSurrogate/HandGrasp-v0      three-finger hand
    ContactSurrogate/JacoGrasp-v0      the Kinova Jaco three-finger hand (dm_control's model and meshes:
                                       ``pip install --no-deps dm-control``), on the rig's positioned base

Gymnasium 1.x loads no plugins (entry points) on its own, so a bare id needs this package
imported first. Gymnasium's ``"module:EnvId"`` form imports the module itself, so this works in
a fresh interpreter without importing the project::

    env = gymnasium.make("surrogate.envs:ContactSurrogate/GripperGrasp-v0", object="capsule", object_seed=100,
                         contact="surrogate", checkpoint="checkpoints/rig_default")
    venv = gymnasium.make_vec("surrogate.envs:ContactSurrogate/GripperGrasp-v0", num_envs=64,
                              vectorization_mode="vector_entry_point")   # one network call per physics step

See ``surrogate.envs.grasp`` for spaces, reward and termination.
"""

import gymnasium as gym

from surrogate.envs.grasp import HANDS, GraspEnv, GraspTask, GraspVectorEnv, resolve_object

ENV_IDS = {"ContactSurrogate/GripperGrasp-v0": "parallel_jaw", "ContactSurrogate/HandGrasp-v0": "three_finger",
           "ContactSurrogate/JacoGrasp-v0": "jaco"}
MAX_EPISODE_STEPS = 150  # 3 s at the default control_dt of 20 ms


def register_envs() -> None:
    """Register the environments (idempotent)."""
    for env_id, hand in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point="surrogate.envs.grasp:GraspEnv",
                     vector_entry_point="surrogate.envs.grasp:GraspVectorEnv",
                     max_episode_steps=MAX_EPISODE_STEPS, kwargs={"hand": hand})


register_envs()

__all__ = ["ENV_IDS", "HANDS", "MAX_EPISODE_STEPS", "GraspEnv", "GraspTask", "GraspVectorEnv", "register_envs",
           "resolve_object"]
