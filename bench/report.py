"""The benchmark's outputs: ratios, targets, the text table, the JSON and the PNG."""

from __future__ import annotations

import json
from pathlib import Path

COLUMNS = [("ours", "ours"), ("reference", "0.3.0"), ("bare", "bare")]
# Targets for this service (see bench/README.md): those of /assist as a FastAPI path operation.
MIN_TIMES_REFERENCE = 8.0
MIN_SHARE_OF_BARE = 0.7
MAX_TTFE_MS = 5.0
MAX_KB_PER_STREAM = 30.0


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q` quantile of `values` (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _get(summary: dict, key: str, metric: str):
    return summary.get(key, {}).get(metric)


def _ratio(a, b):
    return a / b if a is not None and b else None


def ratios(summary: dict) -> dict:
    out = {}
    for metric in ("single_events_per_s", "concurrent_events_per_s", "ttfe_ms", "rss_kb_per_stream"):
        ours = _get(summary, "ours", metric)
        out[metric] = {
            "ours/0.3.0": _ratio(ours, _get(summary, "reference", metric)),
            "ours/bare": _ratio(ours, _get(summary, "bare", metric)),
        }
        if "baseline" in summary:
            out[metric]["ours/baseline"] = _ratio(ours, _get(summary, "baseline", metric))
    return out


def columns(summary: dict) -> list[tuple[str, str]]:
    """The servers' columns: ours, the baseline's (`--baseline`) if measured, 0.3.0, bare."""
    baseline = [("baseline", summary["baseline"]["label"])] if "baseline" in summary else []
    return COLUMNS[:1] + baseline + COLUMNS[1:]


# The figures of the A/B table (`--baseline`): (title, load, figure of a repeat, format).
AB_FIGURES = [
    ("events/s, 1 stream", "single", "events_per_s", ",.0f"),
    ("events/s, concurrent", "concurrent", "events_per_s", ",.0f"),
    ("server CPU us per event, 1 stream", "single", "server_cpu_us_per_event", ".2f"),
    ("server CPU us per event, concurrent", "concurrent", "server_cpu_us_per_event", ".2f"),
    ("time to first event, ms (median)", "ttfe", "ms", ".2f"),
    ("time to first event, ms (p90)", "ttfe", "p90_ms", ".2f"),
    ("RSS per waiting stream, KB", "waiting", "kb_per_stream", ".1f"),
]


def ab_table(results: dict, markdown: bool = False) -> str:
    """Ours against the baseline: each figure's median over the repeats, its range in brackets."""
    import statistics

    label = results["servers"]["baseline"]["label"]
    head = ["metric", "ours", label, "ours/baseline"]
    body = []
    for title, load, figure, spec in AB_FIGURES:
        line, medians = [title], []
        for key in ("ours", "baseline"):
            values = [r[figure] for r in results["runs"][key][load] if r.get(figure) is not None]
            medians.append(statistics.median(values) if values else None)
            line.append(
                f"{statistics.median(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})" if values else "-"
            )
        body.append([*line, _fmt(_ratio(*medians), "ratio")])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|"]
        return "\n".join(out + ["| " + " | ".join(line) + " |" for line in body])
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(line))
        for line in [head, *body]
    )


def targets(summary: dict, loads: dict) -> list[dict]:
    def check(name: str, value, ok, shown: str) -> dict:
        if value is None:
            return {"target": name, "value": None, "shown": "not measured", "result": "n/a"}
        return {"target": name, "value": value, "shown": shown, "result": "PASS" if ok else "FAIL"}

    r = ratios(summary)
    out = []
    for metric, what in (
        ("single_events_per_s", "1 stream"),
        ("concurrent_events_per_s", f"{loads['concurrent_streams']} streams"),
    ):
        times = r[metric]["ours/0.3.0"]
        out.append(
            check(
                f"events/s, {what}: at least {MIN_TIMES_REFERENCE:g}x 0.3.0",
                times,
                times is not None and times >= MIN_TIMES_REFERENCE,
                f"{times or 0:.2f}x",
            )
        )
        share = r[metric]["ours/bare"]
        out.append(
            check(
                f"events/s, {what}: at least {MIN_SHARE_OF_BARE:.0%} of bare",
                share,
                share is not None and share >= MIN_SHARE_OF_BARE,
                f"{share or 0:.0%}",
            )
        )
    ttfe = _get(summary, "ours", "ttfe_ms")
    out.append(
        check(
            f"time to first event under {MAX_TTFE_MS:g} ms",
            ttfe,
            ttfe is not None and ttfe < MAX_TTFE_MS,
            f"{ttfe or 0:.2f} ms",
        )
    )
    completed = _get(summary, "ours", "waiting_completed")
    streams = _get(summary, "ours", "waiting_streams")
    out.append(
        check(
            f"{loads['waiting_streams']:,} waiting streams: every one completes",
            completed,
            completed is not None and completed == streams,
            f"{completed}/{streams}",
        )
    )
    kb = _get(summary, "ours", "rss_kb_per_stream")
    out.append(
        check(
            f"{loads['waiting_streams']:,} waiting streams: at most {MAX_KB_PER_STREAM:g} KB RSS each",
            kb,
            kb is not None and kb <= MAX_KB_PER_STREAM,
            f"{kb or 0:.1f} KB",
        )
    )
    bad = _get(summary, "ours", "streams_with_problems")
    out.append(check("no event lost or reordered, any load", bad, bad == 0, f"{bad} streams with problems"))
    return out


def _fmt(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "ms":
        return f"{value:.2f}"
    if kind == "kb":
        return f"{value:.1f}"
    if kind in ("us", "s"):
        return f"{value:.1f}"
    if kind == "pct":
        return f"{value:.0%}"
    if kind == "ratio":
        return f"{value:.2f}x"
    return str(value)


def rows(results: dict) -> list[tuple[str, str, str]]:
    loads = results["loads"]
    return [
        (f"events/s, 1 stream x {loads['single_chunks']:,} chunks", "single_events_per_s", "rate"),
        (
            f"events/s, {loads['concurrent_streams']} streams x {loads['concurrent_chunks']:,} chunks",
            "concurrent_events_per_s",
            "rate",
        ),
        (f"time to first event, ms (median, stream:{loads['ttfe_chunks']})", "ttfe_ms", "ms"),
        ("time to first event, ms (p90)", "ttfe_p90_ms", "ms"),
        (
            f"RSS per waiting stream, KB ({loads['waiting_streams']:,} x wait:{loads['waiting_seconds']:g})",
            "rss_kb_per_stream",
            "kb",
        ),
        (f"waiting streams completed (of {loads['waiting_streams']:,}, worst repeat)", "waiting_completed", "int"),
        (
            f"seconds until all {loads['waiting_streams']:,} waiting streams are open",
            "waiting_seconds_to_open_all",
            "s",
        ),
        ("streams with problems (lost, reordered, failed)", "streams_with_problems", "int"),
        ("server CPU us per event, 1 stream", "single_server_cpu_us_per_event", "us"),
        ("server CPU us per event, concurrent", "concurrent_server_cpu_us_per_event", "us"),
        ("client busy, 1 stream (share of one core)", "single_client_busy", "pct"),
        ("client busy, concurrent (share of one core)", "concurrent_client_busy", "pct"),
    ]


RATIO_METRICS = {
    "single_events_per_s",
    "concurrent_events_per_s",
    "ttfe_ms",
    "rss_kb_per_stream",
    "waiting_seconds_to_open_all",
    "single_server_cpu_us_per_event",
    "concurrent_server_cpu_us_per_event",
}


def table(results: dict, markdown: bool = False) -> str:
    summary = results["servers"]
    shown = columns(summary)
    compared = ["reference", "bare", *(["baseline"] if "baseline" in summary else [])]
    head = [
        "metric",
        *(label for _, label in shown),
        "ours/0.3.0",
        "ours/bare",
        *(["ours/baseline"] * (len(compared) > 2)),
    ]
    body = []
    for title, metric, kind in rows(results):
        values = {key: _get(summary, key, metric) for key, _ in shown}
        line = [title, *(_fmt(values[key], kind) for key, _ in shown)]
        if metric in RATIO_METRICS:
            line += [_fmt(_ratio(values["ours"], values.get(key)), "ratio") for key in compared]
        else:
            line += ["" for _ in compared]
        body.append(line)
    ab = [ab_table(results, markdown), ""] if "baseline" in summary else []
    if markdown:
        out = [*ab, "| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
        out += ["| " + " | ".join(line) + " |" for line in body]
        out.append("")
        out += ["| target | measured | result |", "|---|---:|---|"]
        out += [f"| {t['target']} | {t['shown']} | **{t['result']}** |" for t in results["targets"]]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    fmt = lambda line: "  ".join(  # noqa: E731
        cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(line)
    )
    machine = results["machine"]
    out = [
        f"{results['date']}; {machine['cpus']} cores, {machine['cpu_model']}; Python {machine['python']}; "
        f"{results['repeats']} repeats (medians), {results['duration_s']} s; "
        f"load average {results['load_average']['start'][0]} -> {results['load_average']['end'][0]}",
        _source_line(results),
        "",
        *ab,
        fmt(head),
        fmt(["-" * w for w in widths]),
        *(fmt(line) for line in body),
        "",
        "targets (this service):",
    ]
    out += [f"  {t['result']:<4}  {t['target']}: {t['shown']}" for t in results["targets"]]
    for key, label in shown:
        if _get(summary, key, "waiting_all_open_seen") is False:
            out.append(
                f"  note ({label}): in some waiting repeat the first stream ended before the last one had "
                "opened; its RSS peak is the highest before the first ended"
            )
        for example in _get(summary, key, "problem_examples") or []:
            out.append(f"  problem ({label}): {example}")
    return "\n".join(out)


def _source_line(results: dict) -> str:
    source = results.get("source") or {}
    changed = source.get("uncommitted") or []
    return f"commit {source.get('commit')}" + (f", with uncommitted changes to {', '.join(changed)}" if changed else "")


def write(results: dict, json_path: Path, *, json_too: bool = True) -> Path | None:
    """Write the JSON, and the PNG beside it when matplotlib is installed; returns the PNG's path."""
    if json_too:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    png = json_path.with_suffix(".png")
    plot(results, png)
    return png


def plot(results: dict, path: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    summary = results["servers"]
    loads = results["loads"]
    keys = [(key, label) for key, label in columns(summary) if key in summary]
    colors = {"ours": "#2b7bba", "baseline": "#8cb8dc", "reference": "#d9822b", "bare": "#7f7f7f"}
    panels = [
        (
            "single_events_per_s",
            f"events/s: 1 stream x {loads['single_chunks']:,} chunks",
            "{:,.0f}",
            "higher is better",
        ),
        (
            "concurrent_events_per_s",
            f"events/s: {loads['concurrent_streams']} streams x {loads['concurrent_chunks']:,} chunks",
            "{:,.0f}",
            "higher is better",
        ),
        ("ttfe_ms", f"time to first event, ms (median, stream:{loads['ttfe_chunks']})", "{:.2f}", "lower is better"),
        (
            "rss_kb_per_stream",
            f"RSS per waiting stream, KB ({loads['waiting_streams']:,} streams)",
            "{:.1f}",
            "lower is better",
        ),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (metric, title, fmt, better) in zip(axes.flat, panels, strict=True):
        labels = [label for _, label in keys]
        values = [_get(summary, key, metric) for key, _ in keys]
        heights = [v or 0 for v in values]
        bars = ax.bar(labels, heights, color=[colors[key] for key, _ in keys], width=0.6)
        top = max(heights) if any(heights) else 1
        for bar, value in zip(bars, values, strict=True):
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                bar.get_height() + top * 0.015,
                "-" if value is None else fmt.format(value),
                ha="center",
                va="bottom",
                fontsize=10,
            )
        target = None
        if metric in ("single_events_per_s", "concurrent_events_per_s"):
            ref, bare = _get(summary, "reference", metric), _get(summary, "bare", metric)
            target = max(
                x for x in (ref and ref * MIN_TIMES_REFERENCE, bare and bare * MIN_SHARE_OF_BARE, 0) if x is not None
            )
            target_label = f"target: {MIN_TIMES_REFERENCE:g}x 0.3.0 and {MIN_SHARE_OF_BARE:.0%} of bare"
        elif metric == "ttfe_ms":
            target, target_label = MAX_TTFE_MS, f"target: under {MAX_TTFE_MS:g} ms"
        else:
            target, target_label = MAX_KB_PER_STREAM, f"target: at most {MAX_KB_PER_STREAM:g} KB"
        if target:
            ax.axhline(target, color="#c0392b", linestyle="--", linewidth=1)
            ax.annotate(
                target_label,
                (1.0, target),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                color="#c0392b",
                ha="right",
                va="bottom",
                fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8},
            )
        ax.set_ylim(0, max(top, target or 0) * 1.15)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}" if y >= 100 else f"{y:g}"))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(better, fontsize=8, color="#555555")
        ax.spines[["top", "right"]].set_visible(False)
    machine = results["machine"]
    fig.suptitle(
        f"POST /assist: this service vs sentient-agent-framework 0.3.0 vs a bare ASGI floor\n"
        f"{results['date']}, {machine['cpus']} cores, Python {machine['python']}, "
        f"medians of {results['repeats']} repeats" + (" (quick run)" if results["quick"] else ""),
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
