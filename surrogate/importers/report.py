"""What an import did: kept episodes and skipped inputs with their reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CaptureError

MAX_LISTED = 20  # skipped inputs printed in a summary (all are stored in meta/contact.json)


def _where(s: dict) -> str:
    return ": ".join(str(x) for x in (s["file"], s["episode"] is not None and f"episode {s['episode']}",
                                      s["field"] and f"field '{s['field']}'") if x)


def skipped_lines(skipped: list, limit: int = MAX_LISTED) -> list:
    """One ``  - file: episode: field: reason`` line per skipped input (at most ``limit``, then a count)."""
    lines = [f"  - {_where(s)}: {s['reason']}" for s in skipped[:limit]]
    if len(skipped) > limit:
        lines.append(f"  ... and {len(skipped) - limit} more")
    return lines


@dataclass
class ImportReport:
    out: Path | None = None
    kept: int = 0
    frames: int = 0
    skipped: list = field(default_factory=list)  # [{"file","episode","field","reason"}]
    warnings: list = field(default_factory=list)  # [str] about the kept episodes (e.g. ``floor_check``'s)

    def skip(self, err: CaptureError | Exception, *, file=None, episode=None) -> None:
        if isinstance(err, CaptureError):
            where = err.file or file
            self.skipped.append({"file": None if where is None else str(where),  # null, not the text 'None'
                                 "episode": err.episode if err.episode is not None else episode,
                                 "field": err.field, "reason": err.reason})
        else:
            self.skipped.append({"file": None if file is None else str(file), "episode": episode, "field": None,
                                 "reason": f"{type(err).__name__}: {err}"})

    def check_output(self, *, overwrite: bool = False) -> None:
        """Fail before any work if ``self.out`` exists and may not be replaced (without ``overwrite``,
        or with it when the folder is not a capture dataset this project wrote)."""
        from ..capture.writer import check_replaceable_dataset

        out = Path(self.out)
        if out.exists() or out.is_symlink():
            if not overwrite:
                raise FileExistsError(f"{out}: already exists (pass overwrite=True / --overwrite to replace it)")
            check_replaceable_dataset(out)

    def write(self, episodes, meta, *, overwrite: bool = False) -> ImportReport:
        """Write the kept ``episodes`` (the skipped inputs travel in ``meta.skipped``) atomically to ``self.out``.

        With no episode left, nothing is written and the CaptureError lists why each input was skipped."""
        from ..capture.writer import CaptureWriter

        episodes = list(episodes)
        if not episodes:
            self._nothing_to_write()
        meta.skipped = self.skipped  # the same list: episodes the writer rejects below are recorded too
        with CaptureWriter(self.out, meta, overwrite=overwrite) as w:
            for ep in episodes:
                try:
                    w.add(ep)  # a rejected episode leaves the writer as it was
                except CaptureError as e:
                    self.skip(e, episode=ep.episode_id)
                    continue
                self.kept += 1
                self.frames += ep.num_frames
            if not self.kept:
                self._nothing_to_write()
        return self

    def _nothing_to_write(self):
        lines = [f"no valid episodes to write: all {len(self.skipped)} inputs were skipped"] + skipped_lines(self.skipped)
        raise CaptureError("\n".join(lines), file=self.out)

    def summary(self) -> str:
        lines = [f"kept {self.kept} episodes ({self.frames} frames) -> {self.out}", f"skipped {len(self.skipped)} inputs"]
        lines += skipped_lines(self.skipped)
        if len(self.skipped) > MAX_LISTED:
            lines[-1] += " (see meta/contact.json 'skipped')"
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)
