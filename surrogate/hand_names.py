"""The names of the hands, in one place (nothing imported: the CLI's choices read them without loading MuJoCo)."""

CODE_HANDS = ("parallel_jaw", "three_finger")  # written in code (``scenes.hands``); ``hand="both"`` alternates them
GRASPING_HANDS = (*CODE_HANDS, "jaco")  # every hand a scene builds (jaco: dm_control's Kinova hand, ``scenes.jaco_hand``)
HANDS = ("none", *GRASPING_HANDS)  # every ``hand=`` of a scene (none: the object alone)
