#!/usr/bin/env python3
"""Render a dagrt timeline trace (Chrome trace-event JSON) to a PNG with headless Chromium.

    scripts/render_trace.py TRACE.json OUT.png [--title TEXT] [--html OUT.html]
                            [--width 1600] [--height 600] [--no-arrows]

The picture has one row per lane (the trace's thread_name rows, in sort order) with one box per
task colored by its callable name, the scheduler rows (completion and dispatch passes: one for
the scheduler thread, one per lane that ran passes itself), and the
dependency edges as flow arrows from the end of the producer ("s" event) to the start of the
consumer ("f" event). The page is self-contained: the JSON is inlined into the HTML next to a
small canvas renderer, so nothing is fetched at render time. Chromium (Debian package
`chromium`) takes the screenshot: --headless --screenshot --window-size=WIDTHxHEIGHT.
--html also keeps the page (open it in any browser).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>dagrt timeline</title>
<style>html,body{margin:0;padding:0;background:#fff;overflow:hidden}canvas{display:block}</style>
</head><body><canvas id="c"></canvas>
<script>
const TRACE = __TRACE__;
const TITLE = __TITLE__;
const ARROWS = __ARROWS__;
const W = __WIDTH__, H = __HEIGHT__;
const cv = document.getElementById("c");
const dpr = window.devicePixelRatio || 1;
cv.width = W * dpr; cv.height = H * dpr; cv.style.width = W + "px"; cv.style.height = H + "px";
const g = cv.getContext("2d");
g.scale(dpr, dpr);
const FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif";

const ev = TRACE.traceEvents || [];
const names = {}, order = {};
for (const e of ev) {
  if (e.ph !== "M") continue;
  if (e.name === "thread_name") names[e.tid] = e.args.name;
  if (e.name === "thread_sort_index") order[e.tid] = e.args.sort_index;
}
const tasks = ev.filter(e => e.ph === "X" && e.cat === "task");
const sched = ev.filter(e => e.ph === "X" && e.cat === "scheduler");
const flowS = {}, flowF = {};
for (const e of ev) { if (e.ph === "s") flowS[e.id] = e; else if (e.ph === "f") flowF[e.id] = e; }
const byOrder = (a, b) => (order[a] ?? a) - (order[b] ?? b);
const isSched = t => names[t] === "scheduler" || names[t].startsWith("scheduler passes on ");
const schedTids = Object.keys(names).map(Number).filter(isSched).sort(byOrder);
const laneTids = Object.keys(names).map(Number).filter(t => !isSched(t)).sort(byOrder);

// Time range: the traced activity (tasks and scheduler passes).
let t0 = Infinity, t1 = -Infinity;
for (const e of tasks.concat(sched)) { t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts + e.dur); }
if (!isFinite(t0)) { t0 = 0; t1 = 1; }
const span = Math.max(t1 - t0, 1e-3);

// Layout.
const L = 150, R = 20, TOP = 78, BOTTOM = 44;
const schedH = 34, gap = 10;
const schedRows = schedTids.length * (schedH + 2);
const laneH = Math.max(14, Math.min(220, (H - TOP - BOTTOM - schedRows - gap * laneTids.length) / Math.max(laneTids.length, 1)));
const rowY = {}, schedRowY = {};
let y = TOP;
for (const t of laneTids) { rowY[t] = y; y += laneH + gap; }
for (const t of schedTids) { schedRowY[t] = y; y += schedH + 2; }
const X = ts => L + (ts - t0) / span * (W - L - R);

// Colors by callable name: a fixed palette for the Cholesky kernels, then a cycle.
const known = {potrf: "#d62728", trsm: "#1f77b4", syrk: "#2ca02c", gemm: "#ff7f0e"};
const cycle = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const color = {};
let ci = 0;
for (const e of tasks) if (!(e.name in color)) color[e.name] = known[e.name] || cycle[ci++ % cycle.length];

// Title and legend.
g.fillStyle = "#222"; g.font = "bold 18px " + FONT; g.textBaseline = "alphabetic";
g.fillText(TITLE || "dagrt timeline", 12, 26);
g.font = "13px " + FONT;
let lx = 12;
const counts = {};
for (const e of tasks) counts[e.name] = (counts[e.name] || 0) + 1;
for (const k of Object.keys(color)) {
  g.fillStyle = color[k]; g.fillRect(lx, 40, 14, 14);
  g.fillStyle = "#222"; const s = k + " (" + counts[k] + ")"; g.fillText(s, lx + 19, 52);
  lx += 19 + g.measureText(s).width + 18;
}
g.fillStyle = "#888"; g.fillRect(lx, 40, 14, 14); g.fillStyle = "#222";
g.fillText("scheduler pass", lx + 19, 52); lx += 19 + g.measureText("scheduler pass").width + 18;
if (ARROWS) {
  g.strokeStyle = "rgba(40,40,40,0.8)"; g.lineWidth = 1.2;
  g.beginPath(); g.moveTo(lx, 47); g.lineTo(lx + 22, 47); g.stroke(); arrowHead(lx, 47, lx + 22, 47, 5);
  g.fillText("dependency (producer end \u2192 consumer start)", lx + 28, 52);
}

// Rows.
const busy = {};
for (const e of tasks) busy[e.tid] = (busy[e.tid] || 0) + e.dur;
g.textBaseline = "middle";
for (const t of laneTids) {
  g.fillStyle = "#f4f4f4"; g.fillRect(L, rowY[t], W - L - R, laneH);
  g.fillStyle = "#222"; g.font = "bold 13px " + FONT;
  g.fillText(names[t], 10, rowY[t] + laneH / 2 - 9);
  g.font = "12px " + FONT; g.fillStyle = "#555";
  g.fillText("busy " + (100 * (busy[t] || 0) / span).toFixed(0) + "%, " +
             tasks.filter(e => e.tid === t).length + " tasks", 10, rowY[t] + laneH / 2 + 9);
}
for (const t of schedTids) {
  const label = names[t] === "scheduler" ? "scheduler thread" : names[t].replace("scheduler passes on ", "passes on ");
  g.fillStyle = "#f4f4f4"; g.fillRect(L, schedRowY[t], W - L - R, schedH);
  g.fillStyle = "#222"; g.font = "12px " + FONT; g.fillText(label, 10, schedRowY[t] + schedH / 2);
}

// Task boxes.
g.font = "11px " + FONT; g.textAlign = "center";
for (const e of tasks) {
  const yy = rowY[e.tid]; if (yy === undefined) continue;
  const x0 = X(e.ts), w = Math.max(X(e.ts + e.dur) - x0, 0.6);
  g.fillStyle = e.args && e.args.failed ? "#000" : color[e.name];
  g.fillRect(x0, yy + 3, w, laneH - 6);
  if (w > 3) { g.strokeStyle = "rgba(255,255,255,0.9)"; g.lineWidth = 0.8; g.strokeRect(x0 + 0.4, yy + 3.4, w - 0.8, laneH - 6.8); }
  if (w > 34) { g.fillStyle = "#fff"; g.fillText(e.name, x0 + w / 2, yy + laneH - 14); }
}
g.textAlign = "left";
// Scheduler passes: completions dark, dispatch light.
for (const e of sched) {
  const schedY = schedRowY[e.tid]; if (schedY === undefined) continue;
  const x0 = X(e.ts), w = Math.max(X(e.ts + e.dur) - x0, 0.8);
  g.fillStyle = e.name === "dispatch" ? "#aaa" : "#555";
  const half = e.name === "dispatch" ? 1 : 0;
  g.fillRect(x0, schedY + 4 + half * (schedH - 8) / 2, w, (schedH - 8) / 2);
}

// Dependency arrows: producer end (s) -> consumer start (f).
function arrowHead(x0, y0, x1, y1, s) {
  const a = Math.atan2(y1 - y0, x1 - x0);
  g.beginPath(); g.moveTo(x1, y1);
  g.lineTo(x1 - s * Math.cos(a - 0.45), y1 - s * Math.sin(a - 0.45));
  g.lineTo(x1 - s * Math.cos(a + 0.45), y1 - s * Math.sin(a + 0.45));
  g.closePath(); g.fillStyle = g.strokeStyle; g.fill();
}
if (ARROWS) {
  const ids = Object.keys(flowS).filter(i => i in flowF);
  const alpha = Math.max(0.12, Math.min(0.7, 60 / Math.max(ids.length, 1)));
  g.lineWidth = 1;
  for (const i of ids) {
    const s = flowS[i], f = flowF[i];
    if (rowY[s.tid] === undefined || rowY[f.tid] === undefined) continue;
    const x0 = X(s.ts), x1 = X(f.ts);
    let y0, y1;
    if (s.tid === f.tid) { y0 = y1 = rowY[s.tid] + 10; }
    else if (rowY[s.tid] < rowY[f.tid]) { y0 = rowY[s.tid] + laneH - 3; y1 = rowY[f.tid] + 3; }
    else { y0 = rowY[s.tid] + 3; y1 = rowY[f.tid] + laneH - 3; }
    g.strokeStyle = "rgba(30,30,30," + alpha.toFixed(3) + ")";
    g.beginPath(); g.moveTo(x0, y0);
    if (s.tid === f.tid) {
      const lift = Math.min(18, 4 + (x1 - x0) / 6);
      g.bezierCurveTo(x0, y0 - lift, x1, y1 - lift, x1, y1);
    } else {
      const my = (y0 + y1) / 2;
      g.bezierCurveTo(x0, my, x1, my, x1, y1);
    }
    g.stroke();
    arrowHead(x1 - 0.01 * (x1 - x0), y1 + (s.tid === f.tid ? -1 : (y1 > y0 ? -1 : 1)), x1, y1, 4);
  }
}

// Time axis.
const axY = y + 6;
g.strokeStyle = "#444"; g.lineWidth = 1;
g.beginPath(); g.moveTo(L, axY); g.lineTo(W - R, axY); g.stroke();
const spanMs = span / 1000;
const steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
const step = steps.find(s => spanMs / s <= 12) || 10000;
g.fillStyle = "#333"; g.font = "12px " + FONT; g.textAlign = "center"; g.textBaseline = "top";
for (let v = 0; v <= spanMs + 1e-9; v += step) {
  const x = L + v / spanMs * (W - L - R);
  g.beginPath(); g.moveTo(x, axY); g.lineTo(x, axY + 5); g.stroke();
  g.fillText((step < 1 ? v.toFixed(2) : v.toFixed(0)) + " ms", x, axY + 8);
}
g.textAlign = "right";
g.fillText(tasks.length + " tasks, " + Object.keys(flowS).length + " dependency edges, " +
           spanMs.toFixed(1) + " ms", W - R, 14);
document.title = "rendered";
</script></body></html>
"""


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    ap.add_argument("--html", help="also keep the self-contained HTML page here")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=600)
    ap.add_argument("--no-arrows", action="store_true")
    a = ap.parse_args()

    with open(a.trace) as f:
        trace = json.load(f)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        sys.exit("render_trace.py: %s has no traceEvents list" % a.trace)
    # </script> cannot appear inside the inlined JSON: escape every '<'. One pass over the
    # template, so a placeholder's text inside the trace (a callable named __TITLE__) is not
    # replaced in turn.
    values = {
        "TRACE": json.dumps(trace, separators=(",", ":")).replace("<", "\\u003c"),
        "TITLE": json.dumps(a.title).replace("<", "\\u003c"),
        "ARROWS": "false" if a.no_arrows else "true",
        "WIDTH": str(a.width),
        "HEIGHT": str(a.height),
    }
    page = re.sub(r"__(TRACE|TITLE|ARROWS|WIDTH|HEIGHT)__", lambda m: values[m.group(1)], PAGE)
    if a.html:
        with open(a.html, "w") as f:
            f.write(page)

    chromium = find_chromium()
    if not chromium:
        sys.exit("render_trace.py: chromium not found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="dagrt-render-") as tmp:
        html = os.path.join(tmp, "timeline.html")
        with open(html, "w") as f:
            f.write(page)
        out = os.path.abspath(a.out)
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
               "--user-data-dir=" + os.path.join(tmp, "profile"),
               "--window-size=%d,%d" % (a.width, a.height), "--screenshot=" + out,
               "file://" + html]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=120)
        except subprocess.TimeoutExpired as x:
            out = x.stdout or b""  # bytes even in text mode (subprocess quirk)
            sys.stderr.write(out.decode(errors="replace") if isinstance(out, bytes) else out)
            sys.exit("render_trace.py: chromium did not finish within %d s" % x.timeout)
        if p.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) == 0:
            sys.stderr.write(p.stdout)
            sys.exit("render_trace.py: chromium failed (exit %d)" % p.returncode)
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
