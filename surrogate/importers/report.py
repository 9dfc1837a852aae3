"""What an import did: kept episodes and skipped inputs with their reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CaptureError


@dataclass
class ImportReport:
    out: Path | None = None
    kept: int = 0
    frames: int = 0
    skipped: list = field(default_factory=list)  # [{"file","episode","field","reason"}]

    def skip(self, err: CaptureError | Exception, *, file=None, episode=None) -> None:
        if isinstance(err, CaptureError):
            self.skipped.append({"file": str(err.file or file), "episode": err.episode if err.episode is not None else episode,
                                 "field": err.field, "reason": err.reason})
        else:
            self.skipped.append({"file": str(file), "episode": episode, "field": None, "reason": f"{type(err).__name__}: {err}"})

    def write(self, episodes, meta, *, overwrite: bool = False) -> "ImportReport":
        """Write the kept ``episodes`` (the skipped inputs travel in ``meta.skipped``) atomically to ``self.out``."""
        from ..capture.writer import CaptureWriter

        meta.skipped = self.skipped
        with CaptureWriter(self.out, meta, overwrite=overwrite) as w:
            for ep in episodes:
                w.add(ep)
                self.kept += 1
                self.frames += ep.num_frames
        return self

    def summary(self) -> str:
        lines = [f"kept {self.kept} episodes ({self.frames} frames) -> {self.out}", f"skipped {len(self.skipped)} inputs"]
        for s in self.skipped[:20]:
            where = ": ".join(str(x) for x in (s["file"], s["episode"] and f"episode {s['episode']}", s["field"] and f"field '{s['field']}'") if x)
            lines.append(f"  - {where}: {s['reason']}")
        if len(self.skipped) > 20:
            lines.append(f"  ... and {len(self.skipped) - 20} more (see meta/contact.json 'skipped')")
        return "\n".join(lines)
