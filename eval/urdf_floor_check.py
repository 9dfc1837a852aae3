"""How far the links of a URDF object sink into the floor on its recorded tosses, for the URDF and for wrong variants.

    python eval/urdf_floor_check.py [SRC] [--urdf URDF ...]

The URDF importer's check (``surrogate/importers/floor_check.py``) warns when a URDF does not describe the tossed
object. This prints what it reads on the tosses at ``SRC`` (default: the shared elbow tosses): per URDF, per link,
the median and largest depth below the floor over the tosses and how many tosses sink more than the check's 20 mm.
Rows: each ``--urdf`` (default: the shared elbow's two URDFs), then variants of the first one's first joint that
describe another object: its axis flipped, its zero turned by pi about the axis, its origin mirrored along the
child link, its origin moved to the parent's other side. Writes nothing but temporary URDFs.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from surrogate.importers.floor_check import MISMATCH_SHARE, SINK_M, deepest_per_link, floor_warnings

SHARED = Path(os.environ.get("SURROGATE_DATA", "../shared/data"))


def variants(urdf: Path) -> dict[str, str]:
    """Wrong descriptions of the object: text edits of the first joint (and of the child link's shapes)."""
    text = urdf.read_text()
    joint = re.search(r"<joint .*?</joint>", text, re.S).group(0)
    origin = re.search(r'<origin xyz="([^"]*)" rpy="([^"]*)"\s*/>', joint)
    axis = re.search(r'<axis xyz="([^"]*)"\s*/>', joint)
    x, y, z = (float(v) for v in origin.group(1).split())
    ax = [float(v) for v in axis.group(1).split()]
    rpy = " ".join(f"{np.pi * a:g}" for a in ax)  # a turn by pi about the axis (an axis along x, y or z)

    def edit(new_joint: str, body=lambda t: t) -> str:
        return body(text.replace(joint, new_joint))

    flip = joint.replace(axis.group(0), axis.group(0).replace(axis.group(1), " ".join(f"{-a:g}" for a in ax)))
    child = re.search(r'<child link="([^"]*)"', joint).group(1)

    def mirror_child(t: str) -> str:  # the child link's shapes and mass on the other side of its frame
        link = re.search(rf'<link name="{child}">.*?</link>', t, re.S).group(0)
        flip_x = lambda m: f'xyz="{"" if m.group(1) else "-"}{m.group(2)} '  # noqa: E731
        return t.replace(link, re.sub(r'xyz="(-?)([0-9.]+) ', flip_x, link))
    return {"axis flipped": edit(flip),
            "zero turned by pi": edit(joint.replace(origin.group(0), origin.group(0).replace(
                f'rpy="{origin.group(2)}"', f'rpy="{rpy}"'))),
            "origin mirrored along the link": edit(joint.replace(origin.group(1), f"{-x:g} {y:g} {z:g}"), mirror_child),
            "origin on the parent's other side": edit(joint.replace(origin.group(1), f"{x:g} {-y:g} {z:g}"))}


def row(name: str, urdf: Path, src: Path) -> None:
    from surrogate.capture import read_dataset
    from surrogate.importers.dair_urdf import import_urdf_tosses
    from surrogate.objects.articulated import articulation_from_json

    with tempfile.TemporaryDirectory() as tmp:
        ds = read_dataset(import_urdf_tosses(src, Path(tmp) / "ds", urdf, progress=False).out)
    art = articulation_from_json(ds.episodes[0].object.geometry)
    depth = np.stack([deepest_per_link(art, ep)[0] for ep in ds.episodes]) * 1e3
    warned = "yes" if any("do not match" in w for w in floor_warnings(art, ds.episodes)) else "no"
    cells = [f"{lk.name}: {np.median(depth[:, i]):.1f} / {depth[:, i].max():.1f} / {(depth[:, i] > SINK_M * 1e3).sum()}"
             for i, lk in enumerate(art.links)]
    print(f"| {name} | {'; '.join(cells)} | {warned} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", nargs="?", default=str(SHARED / "contactnets_elbow"), help="a folder of N.pt tosses")
    p.add_argument("--urdf", nargs="+", help="the URDFs to check (default: the folder's *.urdf)")
    args = p.parse_args(argv)
    src = Path(args.src)
    urdfs = [Path(u) for u in args.urdf] if args.urdf else sorted(src.glob("*.urdf"))
    print(f"tosses at {src}; per link: median / largest depth below the floor (mm) / tosses deeper than "
          f"{SINK_M * 1e3:.0f} mm; the import warns of a mismatch above {MISMATCH_SHARE:.0%} of the tosses\n")
    print("| URDF | per link | warned |\n|---|---|---|")
    for u in urdfs:
        row(u.name, u, src)
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in variants(urdfs[0]).items():
            path = Path(tmp) / f"{urdfs[0].stem}.urdf"  # same stem: the object keeps its name
            path.write_text(text)
            row(f"{urdfs[0].name}, {name}", path, src)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
