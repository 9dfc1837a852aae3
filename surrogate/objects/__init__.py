"""Object assets: procedural families, mesh files and URDFs, mass properties, named splits.

Every object is an ``ObjectAsset``: convex pieces in the body frame with the
centre of mass at the origin, mass, inertia about the centre of mass, and a
nominal friction.
"""

from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.objects.families import DENSITY_RANGE, FAMILIES, NOMINAL_FRICTION, Family, make_object
from surrogate.objects.folder import load_object_folder
from surrogate.objects.inertia import MassProperties, piece_mass_properties, scale_to_mass, validate_inertia
from surrogate.objects.meshes import MESH_SUFFIXES, convex_pieces, load_mesh_object, read_mesh, split_decomposition
from surrogate.objects.splits import SplitSpec, data_root, load_split, load_split_specs, split_names, split_spec
from surrogate.objects.urdf import load_urdf_object

__all__ = [
    "DENSITY_RANGE",
    "FAMILIES",
    "MESH_SUFFIXES",
    "NOMINAL_FRICTION",
    "Family",
    "MassProperties",
    "ObjectAsset",
    "SplitSpec",
    "convex_pieces",
    "data_root",
    "load_mesh_object",
    "load_object_folder",
    "load_split",
    "load_split_specs",
    "load_urdf_object",
    "make_object",
    "piece_mass_properties",
    "read_mesh",
    "safe_name",
    "scale_to_mass",
    "split_decomposition",
    "split_names",
    "split_spec",
    "validate_inertia",
]
