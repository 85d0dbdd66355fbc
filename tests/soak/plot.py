#!/usr/bin/env python3
"""Draws the soak's resident-memory curves: tests/soak/plot.py OUT.png CSV...

Each CSV (written by tests/soak/soak.sh: seconds,rss_kb,fds, one row a second) gets a panel
named after its file: RSS in MB against seconds, open file descriptors on a second axis when
they change, and the warm-up (the first 20% of the samples; a sixth for load) shaded.
Needs matplotlib (Debian: python3-matplotlib)."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            if line.strip():
                t, rss, fds = line.split(",")
                rows.append((float(t), int(rss) / 1024, int(fds)))
    return rows


def main(out, csvs):
    fig, axes = plt.subplots(len(csvs), 1, figsize=(8, 2.8 * len(csvs)), squeeze=False)
    for ax, path in zip(axes[:, 0], csvs):
        name = os.path.splitext(os.path.basename(path))[0]
        rows = read(path)
        if not rows:
            ax.set_title(f"{name}: no samples")
            continue
        t = [r[0] for r in rows]
        rss = [r[1] for r in rows]
        fds = [r[2] for r in rows]
        warm = max(3, len(rows) // (6 if name == "load" else 5))
        ax.axvspan(t[0], t[min(warm, len(t)) - 1], color="0.9", label="warm-up")
        ax.plot(t, rss, color="tab:blue", label="RSS (MB)")
        base = max(rss[max(0, warm - 3):warm])
        ax.axhline(base * 1.05, color="tab:red", linestyle="--", linewidth=0.8, label="warm-up + 5%")
        ax.set_ylim(0, max(max(rss), base * 1.05) * 1.15)
        ax.set_ylabel("RSS (MB)")
        ax.set_title(f"tcpdoctor {name}: {len(rows)} samples, RSS {base:.1f} MB after warm-up, "
                     f"{max(rss[warm:], default=base):.1f} MB at most after, {rss[-1]:.1f} MB last", fontsize=9)
        if min(fds) != max(fds):
            ax2 = ax.twinx()
            ax2.plot(t, fds, color="tab:green", linewidth=0.8, label="open fds")
            ax2.set_ylabel("open fds")
            ax2.set_ylim(0, max(fds) * 1.3)
            ax2.legend(loc="lower right", fontsize=8)
        ax.legend(loc="lower left", fontsize=8)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"soak: RSS curves drawn in {out}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: plot.py OUT.png CSV...")
    main(sys.argv[1], sys.argv[2:])
