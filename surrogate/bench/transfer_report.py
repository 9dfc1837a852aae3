"""The transfer suite's part of ``report.md``: the ledger rows as a table, first divergences, and a plot of
the sim and rig rates per source (``transfer.png``)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .report import save_figure


def _rate(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def _gap(g, ci) -> str:
    if g is None:
        return "—"
    return f"{g:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")


def plot_transfer(rows: list[dict], path: Path) -> Path | None:
    """Sim and rig success and slip rates per source, side by side."""
    if not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, key in zip(axes, ("success", "slip")):
        xs = range(len(rows))
        sim = [r[f"sim_{key}_rate"] or 0.0 for r in rows]
        rig = [r[f"rig_{key}_rate"] or 0.0 for r in rows]
        ax.bar([x - 0.2 for x in xs], sim, 0.4, label="sim (tuning source)", color="#6baed6")
        ax.bar([x + 0.2 for x in xs], rig, 0.4, label="rig (stand-in for hardware)", color="#d94801")
        ax.set_xticks(list(xs), [r["source"] for r in rows], fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{key} rate, held-out objects", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def transfer_lines(ledger: dict, out: Path) -> list[str]:
    """Markdown lines of the ``transfer`` rows (nothing for other suites)."""
    rows = ledger.get("transfer")
    if not rows:
        return []
    head = ("| source | tuned (grip N, close s, lift m/s) | sim success | rig success | success_gap | sim slip | "
            "rig slip | slip_gap | rollouts | first divergence: median step (kinds) |")
    lines = ["", "## Policy transfer to the rig (stand-in for hardware)", "",
             ("Gaps are sim minus rig over the held-out objects' rollouts, with 95 % bootstrap intervals (objects "
              "resampled). Slip rates are among lifted episodes. A verdict compares a source's |gap| with randomized "
              "MuJoCo's on the 95 % interval of |gap| - randomized |gap|, paired by object: below zero smaller, "
              "containing zero a tie (never supported)."), ""]
    rnd = (ledger.get("result") or {}).get("randomized")
    if rnd:
        lines += [f"**Randomized learned contact against randomized MuJoCo: {rnd['verdict']}.** {rnd['detail']}", ""]
    lines += [head, "|---" * 10 + "|"]
    for r in rows:
        t, fd = r["tuned"], r["first_divergence"]
        kinds = ", ".join(f"{k} {n}" for k, n in fd["kinds"].items())
        kinds += f", never {fd['never']}" if fd["never"] else ""
        med = "—" if fd["median_step"] is None else f"{fd['median_step']:g}"
        lines.append(f"| {r['source']} | {t['grip_force']:g}, {t['close_time']:g}, {t['lift_speed']:g} | "
                     f"{_rate(r['sim_success_rate'])} | {_rate(r['rig_success_rate'])} | "
                     f"{_gap(r['success_gap'], r['success_gap_ci95'])} | {_rate(r['sim_slip_rate'])} | "
                     f"{_rate(r['rig_slip_rate'])} | {_gap(r['slip_gap'], r['slip_gap_ci95'])} | {r['episodes']} | "
                     f"{med} ({kinds}) |")
    for r in rows:
        if r.get("randomization_ranges"):
            rng = ", ".join(f"{k} {v[0]:g}..{v[1]:g}" for k, v in r["randomization_ranges"].items())
            lines += ["", (f"Randomized source `{r['source']}`: anchored on {r.get('anchor')}; ranges (multiplicative; "
                           f"delay_s additive, unused by these rollouts): {rng}.")]
        if r.get("skipped_objects"):
            lines += ["", f"{r['source']}: skipped objects: " + "; ".join(r["skipped_objects"].values())]
    p = plot_transfer(rows, Path(out) / "transfer.png")
    if p:
        lines += ["", f"![transfer]({p.name})"]
    return lines
