"""The capture rig: grasp episodes from a reference contact physics outside MuJoCo's
analytic family, recorded with the pathologies of real sensors.

It stands in for hardware where none is attached; every episode it writes says so
(``provenance.real = False``, ``provenance.generator`` holds the rig config).
"""
