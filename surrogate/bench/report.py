"""``report.md`` and plots from a ledger: what people would rather look at than read."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..atomic import write_bytes_atomic, write_text_atomic  # noqa: E402
from .ledger import metric_words  # noqa: E402
from .report_tables import (  # noqa: E402
    articulated_lines,
    attribution_lines,
    divergence_lines,
    ensemble_lines,
    evaluated_models,
    fmt_rate,
    fmt_summary,
    force_lines,
    latency_lines,
    outcome_lines,
    paired_row_lines,
    per_object_lines,
    per_set_lines,
    scaled,
    target_lines,
    test_data_lines,
    video_lines,
)

COLORS = {"analytic_nominal": "#999999", "analytic_randomized": "#6baed6", "analytic_identified": "#08519c", "surrogate": "#d94801"}
_MORE_COLORS = ["#31a354", "#756bb1", "#e7298a", "#a6761d", "#1b9e77"]  # further learned rows (e.g. law_prior)


def color(name: str) -> str:
    """A model's plot colour: fixed for the four standard rows, distinct for further rows."""
    if name in COLORS:
        return COLORS[name]
    return _MORE_COLORS[sum(map(ord, name)) % len(_MORE_COLORS)]


def save_figure(fig, path: Path) -> Path:
    """Save a figure atomically (with the user's umask) and close it.

    Args:
      fig: a matplotlib Figure, written as PNG at 110 dpi.
      path: the PNG file.
    Returns:
      ``path``.
    """
    import io

    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def suite_title(ledger) -> str:
    """The report's name for the run: ``cube-real-small (small run of cube-real)``; a full suite's name alone."""
    name, kind = ledger.get("suite_name") or ledger["suite"], ledger["suite"]
    if name == kind:
        return name
    return f"{name} (small run of {kind})" if "small" in name else f"{name} (suite {kind})"


def small_suite_line(ledger) -> list[str]:
    """A plain statement that a small suite is not the benchmark (empty for a full suite)."""
    name, kind = ledger.get("suite_name") or ledger["suite"], ledger["suite"]
    if name == kind or "small" not in name:
        return []
    tests = [m["overall"]["episodes"] for m in ledger["models"].values() if "overall" in m]
    return [f"**A small run.** `{name}` is the quick version of the `{kind}` suite "
            f"({tests[0] if tests else '?'} test episodes, smaller budgets: see the config): its figures are "
            f"indicative; the full `{kind}` suite is the benchmark.", ""]


def plot_attribution(ledger, path: Path) -> Path | None:
    """Each model's error change with each rig effect off (paired, at the verdict's horizon, 95 % intervals): below
    zero, that much of the model's error comes from the effect. None for ledgers before the paired attribution (their
    report keeps the tables)."""
    rows = (ledger.get("attribution") or {}).get("rows") or []
    if len(rows) < 2 or not all("paired" in r for r in rows[1:]):
        return None
    models = list(rows[1]["paired"])
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.45 * len(rows[1:]) * max(1, len(models)) ** 0.5))
    for j, m in enumerate(models):
        pts = [(i, r["paired"][m]["at_horizon"]) for i, r in enumerate(rows[1:]) if r["paired"][m]["at_horizon"]["ci95"]]
        y = [i + 0.8 * (j - (len(models) - 1) / 2) / len(models) for i, _ in pts]
        err = [[p["mean"] - p["ci95"][0] for _, p in pts], [p["ci95"][1] - p["mean"] for _, p in pts]]
        ax.errorbar([p["mean"] for _, p in pts], y, xerr=err, fmt="o", ms=4, capsize=2, label=m,
                    color=color(f"analytic_{m}" if f"analytic_{m}" in COLORS else m))
    ax.axvline(0.0, color="0.5", lw=0.8)
    ax.set_yticks(range(len(rows) - 1), [r["variant"] for r in rows[1:]], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"position error at {float(ledger['config']['acceptance']['horizon_s']):g} s with the effect off "
                  "minus all on, points of object size")
    ax.set_title("which rig effect each model's error comes from (paired, 95 %)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def _errorbar(ax, xs, summaries, *, label, color, offset=0.0):
    """Means with their 95 % bootstrap intervals at ``xs`` (None summaries skipped)."""
    pts = [(x, s) for x, s in zip(xs, summaries) if s and s.get("mean") is not None]
    if not pts:
        return False
    x = [p[0] * (1 + offset) for p in pts]
    y = [p[1]["mean"] for p in pts]
    ci = [p[1].get("mean_ci95") or [p[1]["mean"]] * 2 for p in pts]
    lo = [max(0.0, p[1]["mean"] - c[0]) for p, c in zip(pts, ci)]  # a percentile interval may sit beside the mean
    hi = [max(0.0, c[1] - p[1]["mean"]) for p, c in zip(pts, ci)]
    ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", capsize=3, label=label, color=color)
    return True


def plot_horizons(ledger, path: Path) -> Path | None:
    """``horizons_figure`` saved to ``path`` (None when there is nothing to plot)."""
    fig = horizons_figure(ledger)
    return None if fig is None else save_figure(fig, path)


def _readable_axis(ax, values: list, stable_values: list, axis: str = "y") -> str:
    """Set ``ax``'s y range so a reader sees the comparison: log where the plotted errors span more than a decade,
    and the top clipped to what models without blow-ups reach (``stable_values``), so a blown-up model's capped
    error (the blow-up rule) never sets the axis. Returns a note for the title ("" when nothing was clipped)."""
    vals = [v for v in values if v is not None and np.isfinite(v) and v > 0]
    ok = [v for v in stable_values if v is not None and np.isfinite(v) and v > 0]
    if not vals:
        return ""
    top = max(ok or vals)
    scale, lim = getattr(ax, f"set_{axis}scale"), getattr(ax, f"set_{axis}lim")
    if max(vals) / min(vals) > 10:
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

        scale("log")
        lim(min(vals) / 1.5, top * 1.5)
        axis_ = ax.yaxis if axis == "y" else ax.xaxis
        axis_.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, 20 ...: read without exponents
        axis_.set_major_formatter(ScalarFormatter())
        axis_.set_minor_formatter(NullFormatter())
    else:
        lim(0, top * 1.15)
    return " (axis clipped: a model's errors with blow-ups run off the top)" if max(vals) > top * 1.5 else ""


def horizons_figure(ledger):
    """Error against horizon for every configured horizon that some test episode lasts to
    (``metrics.horizons_s``; empty horizons are dropped and named in the title), means with 95 % bootstrap
    intervals; y axes made readable by ``_readable_axis``."""
    models = evaluated_models(ledger)
    if not models:
        return None
    cfg_h = [float(h) for h in ((ledger.get("config") or {}).get("metrics") or {}).get("horizons_s") or []]
    keys = sorted({float(h) for _, m in models for h in m["overall"]["horizons"]["pos_pct_size"]} | set(cfg_h))
    n_at = {h: max(((m["overall"]["horizons"]["pos_pct_size"].get(f"{h:g}") or {}).get("n") or 0) for _, m in models)
            for h in keys}
    empty = [h for h in keys if not n_at[h]]
    keys = [h for h in keys if n_at[h]]
    if not keys:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    drawn, notes = False, []
    for ax, key, label in ((axes[0], "pos_pct_size", "position error, % of object size"), (axes[1], "rot_deg", "rotation error, deg")):
        vals, stable = [], []
        for j, (name, m) in enumerate(models):
            sums = [m["overall"]["horizons"][key].get(f"{h:g}") for h in keys]
            drawn |= _errorbar(ax, keys, sums, label=name, color=color(name), offset=0.012 * (j - len(models) / 2))
            ys = [v for sm in sums if sm and sm.get("mean") is not None for v in [sm["mean"], *(sm.get("mean_ci95") or [])]]
            vals += ys
            stable += ys if not m["overall"].get("unstable_rate") else []
        ax.set_ylabel(label)
        notes.append(_readable_axis(ax, vals, stable))
    if not drawn:
        plt.close(fig)
        return None
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(keys, [f"{h:g} s\nn={n_at[h]}" for h in keys], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("horizon (n: test episodes that last that long)")
    axes[0].legend(fontsize=8)
    dropped = f"; no test episode lasts {', '.join(f'{h:g}' for h in empty)} s" if empty else ""
    fig.suptitle(f"{suite_title(ledger)}: error at each horizon (mean over test episodes, 95 % bootstrap interval)"
                 f"{dropped}{max(notes, key=len)}", fontsize=9)
    fig.tight_layout()
    return fig


def data_efficiency_points(m: dict) -> list[tuple[int, dict]]:
    """(training episodes, overall metrics) of a model row's ``by_train_size``: numbered sizes and the
    checkpoint given on the command line (``given``, placed at the size its card reports), one point
    per size."""
    pts = {}
    for k, v in (m.get("by_train_size") or {}).items():
        n = int(k) if str(k).isdigit() else v.get("train_size")
        if n is not None and "overall" in v and "pos_pct_size" in v["overall"]:
            pts.setdefault(int(n), v["overall"])
    return sorted(pts.items())


def plot_data_efficiency(ledger, path: Path) -> Path | None:
    """``data_efficiency_figure`` saved to ``path`` (None when there is nothing to plot)."""
    fig = data_efficiency_figure(ledger)
    return None if fig is None else save_figure(fig, path)


def data_efficiency_figure(ledger):
    """Position error against training episodes, means with 95 % bootstrap intervals, for every
    model with errors per training size (``data_efficiency_points``: the surrogate of
    ``--checkpoint`` at the size it was trained on); drawn when some model has several sizes or
    two models have one."""
    series = [(name, data_efficiency_points(m)) for name, m in evaluated_models(ledger)]
    series = [(n, p) for n, p in series if p]
    if not any(len(p) > 1 for _, p in series) and len(series) < 2:
        return None
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    for j, (name, pts) in enumerate(series):
        _errorbar(ax, [p[0] for p in pts], [p[1]["pos_pct_size"] for p in pts], label=name, color=color(name),
                  offset=0.02 * (j - len(series) / 2))
    xs = sorted({p[0] for _, pts in series for p in pts})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("training episodes")
    ax.set_ylabel("position error, % of object size")
    ax.legend(fontsize=8)
    ax.set_title(f"{suite_title(ledger)}\ndata efficiency (mean, 95 % bootstrap interval)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_per_object(ledger, path: Path) -> Path | None:
    """``per_object_figure`` saved to ``path`` (None when there are fewer than two objects)."""
    fig = per_object_figure(ledger)
    return None if fig is None else save_figure(fig, path)


def per_object_figure(ledger):
    """Per-object mean position error as a dot plot: one row per object, sorted by the surrogate's error (else the
    identified baseline's), one dot per model; a log axis where errors span decades (``_readable_axis``)."""
    models = evaluated_models(ledger)
    objects = sorted({o for _, m in models for o in m.get("per_object", {})})
    if len(objects) < 2:
        return None
    ref = dict(models).get("surrogate") or dict(models).get("analytic_identified") or models[0][1]
    def mean(m, o):
        return ((m.get("per_object", {}).get(o) or {}).get("pos_pct_size") or {}).get("mean")
    objects.sort(key=lambda o: mean(ref, o) if mean(ref, o) is not None else -1)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.28 * len(objects)))
    vals, stable = [], []
    for j, (name, m) in enumerate(models):
        ys = [mean(m, o) for o in objects]
        pts = [(v, i) for i, v in enumerate(ys) if v is not None]
        ax.plot([v for v, _ in pts], [i + 0.12 * (j - len(models) / 2) for _, i in pts], "o", ms=5, label=name,
                color=color(name))
        vals += [v for v, _ in pts]
        stable += [v for v, _ in pts] if not m["overall"].get("unstable_rate") else []
    ax.set_yticks(range(len(objects)), objects, fontsize=7)
    ax.grid(axis="y", color="#eeeeee")
    note = _readable_axis(ax, vals, stable, axis="x")
    ax.set_ylim(-0.7, len(objects) - 0.3)
    ax.set_xlabel("mean position error, % of object size" + (" (log)" if ax.get_xscale() == "log" else ""))
    ax.set_title(f"{suite_title(ledger)}: per object, sorted{note}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def write_report(ledger: dict, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = [p for p in (plot_horizons(ledger, out / "horizons.png"), plot_data_efficiency(ledger, out / "data_efficiency.png"),
                         plot_per_object(ledger, out / "per_object.png"), plot_attribution(ledger, out / "attribution.png"),
                         plot_pad_forces(ledger, out / "pad_forces.png")) if p]
    r = ledger["result"]
    lines = [
        f"# Transfer report: {suite_title(ledger)}",
        "",
        *small_suite_line(ledger),
        f"Run {ledger['created']} (config {ledger['config_hash'][:12]}, contact-surrogate {ledger['versions'].get('contact-surrogate')}, "
        f"MuJoCo {ledger['versions'].get('mujoco')}); data `{ledger['data']['name']}` ({ledger['data']['episodes']} episodes, "
        f"hash {ledger['data']['hash'][:12]}).",
        "",
        *test_data_lines(ledger),
        f"**Hypothesis.** {ledger['hypothesis']}",
        "",
        f"**Falsified if.** {ledger['falsified_if']}",
        "",
        f"**Result: {r['verdict']}.** {r['detail']}",
        "",
    ]
    lines += target_lines(r) + outcome_lines(ledger) + force_lines(ledger) + divergence_lines(ledger)
    lines += per_set_lines(ledger) + per_object_lines(ledger) + paired_row_lines(ledger)
    from .transfer_report import transfer_lines

    lines += transfer_lines(ledger, out)
    if not evaluated_models(ledger):
        lines += _tail_lines(ledger, out, plots)
        path = out / "report.md"
        write_text_atomic(path, "\n".join(lines) + "\n")
        return path
    at = next((t["metric"].partition("@")[2].removesuffix("s") for t in r.get("targets", []) if "@" in t["metric"]), None)
    lines += ["", "## Models on the test episodes", "",
              "Mean [95 % bootstrap interval] / median over test episodes; errors per step averaged over each episode's tracked "
              "frames (whole-episode means"
              + (f"; the verdict's metric is the column at {at} s, {metric_words(f'pos_pct_size@{at}s')}" if at else
                 "; the verdict's metric is the position and rotation columns")
              + ").", "",
              "| model | episodes | position, % of size | " + (f"position at {at} s, % of size (verdict) | " if at else "")
              + "position, mm | rotation, deg | penetration, mm | first divergence, s | unstable |",
              "|---|---|---|---|---|---|---|---|" + ("---|" if at else "")]
    for name, m in evaluated_models(ledger):
        o = m["overall"]
        col = f"{fmt_summary(o['horizons']['pos_pct_size'].get(at))} | " if at else ""
        lines.append(f"| {name} | {o['episodes']} | {fmt_summary(o['pos_pct_size'])} | {col}{fmt_summary(scaled(o['pos_m'], 1e3))} | "
                     f"{fmt_summary(o['rot_deg'])} | {fmt_summary(scaled(o.get('penetration_m'), 1e3), 2)} | "
                     f"{fmt_summary(o['divergence']['time_s'], 2)} | {fmt_rate(o.get('unstable_rate'))} |")
    not_eval = [(k, v) for k, v in ledger["models"].items() if "overall" not in v]
    for k, v in not_eval:
        lines.append(f"| {k} | — | {v.get('status')}: {v.get('reason')} | | | | |")
    seen = (ledger["models"].get("surrogate") or {}).get("test_episodes_seen_in_training") or []
    if seen:
        lines += ["", f"Note: the surrogate checkpoint was trained on {len(seen)} of the test episodes "
                      f"({', '.join(seen[:10])}{' ...' if len(seen) > 10 else ''}); its figures are optimistic by that much."]
    rep = ledger.get("reported") or {}
    if rep:
        lines += ["", f"Reported, not re-measured ({rep.get('source', '')}):", "",
                  "| simulator | position, % of width | rotation, deg |", "|---|---|---|"]
        for simname, v in rep.get("pos_pct_width", {}).items():
            lines.append(f"| {simname} (reported) | {v} | {rep.get('rot_deg', {}).get(simname, '—')} |")
    ident = ledger["models"].get("analytic_identified")
    if ident and "identification" in ident:
        lines += ["", "## Identified parameters", "", f"Chosen cone: {ident['params']['cone']}; "
                  f"{ident['identification']['optimizer']}; training loss per cone: "
                  + ", ".join(f"{c} {v['loss']:.4f}" for c, v in ident["identification"]["per_cone"].items()), "",
                  "```json", __import__("json").dumps(ident["params"], indent=1), "```"]
    lines += ensemble_lines(ledger) + latency_lines(ledger) + articulated_lines(ledger)
    lines += _tail_lines(ledger, out, plots)
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def plot_pad_forces(ledger, path: Path) -> Path | None:
    """Recorded against predicted force magnitude |F| of each sensed pad, for the episodes with the median and
    the largest pad force error (``ledger["pad_force_traces"]``, rig grasps with fingertip sensors)."""
    tr = ledger.get("pad_force_traces") or {}
    if not tr:
        return None
    fig, axes = plt.subplots(len(tr), 1, figsize=(8, 3.2 * len(tr)), squeeze=False)
    for ax, (which, t) in zip(axes[:, 0], tr.items()):
        time = np.asarray(t["t"])
        rec = np.asarray(t["recorded"])
        for j, sensor in enumerate(t["sensors"]):
            style = "-" if j == 0 else "--"
            ax.plot(time, rec[:, j], style, color="black", lw=2.0, label=f"recorded {sensor}")
            for name, v in t["models"].items():
                ax.plot(time, np.asarray(v)[:, j], style, color=color(name), lw=1.2, label=f"{name} {sensor}")
        ax.set_title(f"{which} pad force error of {t['model']}: {t['episode']} ({t['object']}), "
                     f"{t['error_weights']:.2f} object weights", fontsize=9)
        ax.set_xlabel("time, s")
        ax.set_ylabel("force on pad |F|, N")
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)


def _tail_lines(ledger, out, plots) -> list[str]:
    lines = []
    pol = [(n, m) for n, m in evaluated_models(ledger, pose=False) if "pos_pct_size" not in m["overall"]]
    if pol:
        lines += ["", "## Policy rollouts", "", "| model | rollouts | success rate [95 % CI] | slip rate (of lifted) | fallbacks |",
                  "|---|---|---|---|---|"]
        for n, m in pol:
            o = m["overall"]
            ci = o["success"].get("mean_ci95") or [None, None]
            ci_txt = "" if ci[0] is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
            lines.append(f"| {n} | {o['episodes']} | {o['success_rate']:.2f}{ci_txt} | {fmt_rate(o['slip_rate'])} | "
                         f"{m.get('stepper', {}).get('fallbacks', 0)} |")
        for k, v in ledger["models"].items():
            if "overall" not in v:
                lines.append(f"| {k} | — | {v.get('status')}: {v.get('reason')} | | |")
    lines += attribution_lines(ledger)
    if evaluated_models(ledger) and any(m["overall"].get("unstable_rate") for _, m in evaluated_models(ledger)):
        lines += ["", "Unstable: fraction of rollouts that blew up (the one blow-up rule, `evaluate.episode_errors`): from the "
                  f"first frame that is non-finite or more than {ledger['config'].get('metrics', {}).get('max_error_m')} m from "
                  "the recording, every frame counts that error and 180 deg."]
    lines += video_lines(ledger)
    lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return lines


