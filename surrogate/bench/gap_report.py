"""The rig gap study's summary, table (gap.md), plot (gap.png) and record (gap.json); ``bench.gap`` runs it."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..atomic import write_bytes_atomic, write_json_atomic, write_text_atomic  # noqa: E402
from . import gap_stats  # noqa: E402

ACCEPT_RATIO = 3.0  # issue 15: the residual of identified MuJoCo at >= 3x the rig's repeatability


def _mean(xs) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def summarize(result: dict) -> dict:
    """Residual against repeatability per split and hand, outcome agreement, and each effect's paired share.

    Returns {"repeatability": {"pos_mm", "rot_deg", "episodes"}, "residual": {split: {hand|"both": ...}},
    "attribution": {split: {effect: {"pos": paired_share, "rot": paired_share, "unstable_off": n}}},
    "overlapping": {split: [(a, b), ...]}, "acceptance": {...}, "rows": [one per variant, held-out]}.
    """
    rep = result["repeatability"]
    rp, rr = _mean([r["pos_mm"] for r in rep]), _mean([r["rot_deg"] for r in rep])
    seed = result["settings"]["seed"]
    by = {v["variant"]: v for v in result["variants"]}
    out = {"repeatability": {"pos_mm": rp, "rot_deg": rr, "episodes": len(rep)}, "residual": {}, "attribution": {},
           "overlapping": {}, "rows": []}
    on = by.get("all_on")
    for split in _splits(result):
        if on is not None:
            per = {}
            for hand in [*result["settings"]["hands"], "both"]:
                sc = [s for s in on["scores"][split] if hand == "both" or s["hand"] == hand]
                r = gap_stats.residual(sc, seed=seed)
                r["outcome"] = gap_stats.outcome_agreement(sc)
                r["ratio_pos"] = _ratio(r["pos_mm"]["mean"], rp)
                r["ratio_rot"] = _ratio(r["rot_deg"]["mean"], rr)
                per[hand] = r
            out["residual"][split] = per
        att = {}
        for v in result["variants"]:
            if v["effect_off"] is None or on is None:
                continue
            att[v["effect_off"]] = {
                "pos": gap_stats.paired_share(*gap_stats.pairs(on["scores"][split], v["scores"][split], "pos_mm"), seed=seed),
                "rot": gap_stats.paired_share(*gap_stats.pairs(on["scores"][split], v["scores"][split], "rot_deg"), seed=seed),
                "unstable_off": sum(s["unstable"] for s in v["scores"][split])}
        out["attribution"][split] = att
        out["overlapping"][split] = {k: gap_stats.overlapping({e: a[k] for e, a in att.items()}) for k in ("pos", "rot")}
    for v in result["variants"]:
        r = gap_stats.residual(v["scores"]["test"], seed=seed)
        out["rows"].append({"variant": v["variant"], "episodes": r["episodes"], "unstable": r["unstable"],
                            "residual_pos_mm": r["pos_mm"]["mean"], "residual_rot_deg": r["rot_deg"]["mean"],
                            "repeat_pos_mm": rp, "repeat_rot_deg": rr, "ratio_pos": _ratio(r["pos_mm"]["mean"], rp),
                            "ratio_rot": _ratio(r["rot_deg"]["mean"], rr), "fitted": v["fitted"]})
    both = out["residual"].get("test", {}).get("both")
    if both:
        out["acceptance"] = {"ratio_pos": both["ratio_pos"], "ratio_rot": both["ratio_rot"], "required": ACCEPT_RATIO,
                             "passed": bool((both["ratio_pos"] or 0) >= ACCEPT_RATIO and (both["ratio_rot"] or 0) >= ACCEPT_RATIO)}
    return out


def _splits(result: dict) -> tuple[str, ...]:
    return tuple(result["variants"][0]["scores"]) if result["variants"] else ()


def _ratio(x, ref):
    return None if x is None or not ref else float(x / ref)


def _ci(s: dict, scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    if s.get("mean") is None:
        return "–"
    lo, hi = s["mean_ci95"]
    return f"{fmt.format(scale * s['mean'])} [{fmt.format(scale * lo)}, {fmt.format(scale * hi)}]"


def _share(p: dict) -> str:
    if p["share"] is None:
        return "–"
    lo, hi = p["share_ci95"]
    return f"{100 * p['share']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def _agree(o: dict) -> str:
    return "–" if not o["episodes"] else f"{o['agree']}/{o['episodes']} ({100 * o['rate']:.0f} % [{100 * o['ci95'][0]:.0f}, {100 * o['ci95'][1]:.0f}])"


def _separation(att: dict, overlaps: list) -> str:
    """One sentence: which of the three largest position shares are separated, and how many include 0."""
    top = sorted((e for e in att if att[e]["pos"]["share"] is not None), key=lambda e: -att[e]["pos"]["share"])[:3]
    ov = [f"{a} ~ {b}" for a, b in overlaps if a in top and b in top]
    zero = [e for e in att if att[e]["pos"]["share_ci95"] and att[e]["pos"]["share_ci95"][0] <= 0 <= att[e]["pos"]["share_ci95"][1]]
    return (f"Largest position shares: {', '.join(top)}; overlapping among them (not separated at this budget): "
            f"{', '.join(ov) if ov else 'none'}. Intervals containing 0 (no effect shown): {len(zero)} of {len(att)}"
            f"{' (' + ', '.join(zero) + ')' if zero else ''}.")


def markdown(result: dict) -> str:
    s, sm = result["settings"], result["summary"]
    rep = sm["repeatability"]
    fit = {v["variant"]: v["fitted"] for v in result["variants"]}
    lines = [f"Rig gap study on `{s['config']}`: {s['train_episodes']} training grasps (`{s['train_objects']}`) and "
             f"{s['test_episodes']} test grasps (`{s['test_objects']}`) per hand ({', '.join(s['hands'])}), {s['duration_s']:g} s each, "
             f"per variant; MuJoCo identified on the variant's training grasps of both hands (friction, solref, solimp, cone, "
             f"mass, latency; differential evolution popsize {s['popsize']}, maxiter {s['maxiter']} per cone); "
             f"{s['workers']} worker(s), {s['wall_s'] / 60:.1f} min. Repeatability: {rep['pos_mm']:.2f} mm / "
             f"{rep['rot_deg']:.2f} deg ({rep['episodes']} held-out grasps recorded twice).", ""]
    if sm["residual"]:
        f = fit.get("all_on", {})
        lines += [f"**All effects on**, identified MuJoCo (cone {f.get('cone')}, friction {f.get('friction', 0):.2f}, "
                  f"mass x{f.get('mass_scale', 1):.2f}, latency {1e3 * f.get('delay_s', 0):.0f} ms); means over stable "
                  "episodes with 95 % bootstrap intervals:", "",
                  "| split | hand | episodes | unstable | residual position, mm | residual rotation, deg | "
                  "x repeatability (pos / rot) | outcome agreement (95 % Wilson) |", "|---|---|---|---|---|---|---|---|"]
        for split, per in sm["residual"].items():
            for hand, r in per.items():
                rp = "–" if r["ratio_pos"] is None else f"{r['ratio_pos']:.1f}x / {r['ratio_rot']:.1f}x"
                lines.append(f"| {'held-out' if split == 'test' else 'training'} | {hand} | {r['episodes']} | {r['unstable']} | "
                             f"{_ci(r['pos_mm'])} | {_ci(r['rot_deg'])} | {rp} | {_agree(r['outcome'])} |")
        lines.append("")
    for split, att in sm["attribution"].items():
        if not att:
            continue
        lines += [f"**Attribution ({'held-out' if split == 'test' else 'training'} split)**: each effect's share of the "
                  "all-on residual, (all on - effect off) / all on, paired over the episodes stable in both (95 % "
                  "bootstrap); MuJoCo re-identified on each variant:", "",
                  "| effect off | pairs | position share | rotation share | unstable (effect off) | fitted cone, friction, mass, latency |",
                  "|---|---|---|---|---|---|"]
        for e, a in sorted(att.items(), key=lambda kv: -(kv[1]["pos"]["share"] or 0)):
            f = fit[f"without_{e}"]
            lines.append(f"| {e} | {a['pos']['n']} | {_share(a['pos'])} | {_share(a['rot'])} | {a['unstable_off']} | "
                         f"{f['cone']}, {f['friction']:.2f}, {f['mass_scale']:.2f}, {1e3 * f['delay_s']:.0f} ms |")
        lines += ["", _separation(att, sm["overlapping"][split]["pos"]), ""]
    acc = sm.get("acceptance")
    if acc:
        lines.append(f"Acceptance (held-out, both hands, all on): residual {acc['ratio_pos']:.1f}x the repeatability in "
                     f"position and {acc['ratio_rot']:.1f}x in rotation (required {acc['required']:g}x in both): "
                     f"{'met' if acc['passed'] else 'NOT met'}.")
    return "\n".join(lines) + "\n"


def plot(result: dict) -> bytes:
    """PNG: held-out residual per hand against the repeatability, and each effect's share with its interval."""
    sm = result["summary"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    per = sm["residual"].get("test", {})
    hands = [h for h in per if h != "both"]
    for k, (key, unit) in enumerate((("pos_mm", "mm"), ("rot_deg", "deg"))):
        x = np.arange(len(hands)) + 0.4 * k
        axes[0].bar(x, [per[h][key]["mean"] or 0 for h in hands], 0.4, label=f"residual ({unit})")
        axes[0].axhline(sm["repeatability"][key] or 0, ls="--", color=f"C{k}", lw=1, label=f"repeatability ({unit})")
    axes[0].set_xticks(np.arange(len(hands)) + 0.2, hands)
    axes[0].set_title("identified MuJoCo, held-out, all effects on")
    axes[0].legend(fontsize=7)
    att = sm["attribution"].get("test", {})
    names = sorted(att, key=lambda e: att[e]["pos"]["share"] or 0)
    for k, key in enumerate(("pos", "rot")):
        y = np.arange(len(names)) + 0.35 * k
        v = [100 * (att[e][key]["share"] or 0) for e in names]
        lo = [v[i] - 100 * att[e][key]["share_ci95"][0] if att[e][key]["share_ci95"] else 0 for i, e in enumerate(names)]
        hi = [100 * att[e][key]["share_ci95"][1] - v[i] if att[e][key]["share_ci95"] else 0 for i, e in enumerate(names)]
        axes[1].barh(y, v, 0.35, xerr=[lo, hi], capsize=2, label="position" if key == "pos" else "rotation")
    axes[1].set_yticks(np.arange(len(names)) + 0.17, names, fontsize=7)
    axes[1].axvline(0, color="k", lw=0.5)
    axes[1].set_xlabel("share of the all-on residual, % (95 % CI)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return buf.getvalue()


def write_study(result: dict, out) -> Path:
    """gap.json (everything, per-episode scores included), gap.md and gap.png under ``out``; returns gap.md."""
    out = Path(out)
    write_json_atomic(out / "gap.json", result)
    write_bytes_atomic(out / "gap.png", plot(result))
    path = out / "gap.md"
    write_text_atomic(path, markdown(result))
    return path
