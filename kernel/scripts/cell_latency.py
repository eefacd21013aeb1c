"""Measure cell latency in the vramlab kernel (a measurement, not a test).

    .venv/bin/python kernel/scripts/cell_latency.py [-n 10]

Starts the real kernel, warms it up, then times N executions of a trivial
cell, N of a cell that imports a project package and N of a cell that
estimates a plan and draws its chart, and prints the medians.
"""

import argparse
import statistics
import time

from jupyter_client.manager import start_new_kernel

# Each run changes the code (a different constant), so every cell is really
# compiled and linked, as when a user edits a cell.
TRIVIAL = '%%\nfmt.Println("ok", {i})'
PROJECT = 'import "github.com/vramlab/vramlab/vram"\n\n%%\nfmt.Println(vram.MustPreset("llama-3-8b").ParamCount() + {i})'
# A tutorial's typical cell: estimate a plan and draw its breakdown.
PLAN = ('import (\n\t"github.com/vramlab/vramlab/charts"\n\t"github.com/vramlab/vramlab/vram"\n)\n\n%%\n'
        't := vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048 + @i@, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw"}\n'
        'e, err := t.Estimate()\ncharts.Must(err)\ncharts.Show(charts.Breakdown(e.Peak, "peak"))')


def run(kc, code):
    start = time.monotonic()
    reply = kc.execute_interactive(code, timeout=120, output_hook=lambda msg: None)
    if reply["content"]["status"] != "ok":
        raise SystemExit(f"cell failed: {reply['content']}")
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    km, kc = start_new_kernel(kernel_name="vramlab")
    try:
        run(kc, 'import "fmt"\n\n%%\nfmt.Println("warm-up")')
        run(kc, PROJECT.format(i=-1))
        trivial = [run(kc, TRIVIAL.format(i=i)) for i in range(args.n)]
        project = [run(kc, PROJECT.format(i=i)) for i in range(args.n)]
        run(kc, PLAN.replace("@i@", "-1"))
        plan = [run(kc, PLAN.replace("@i@", str(i))) for i in range(args.n)]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    print(f"trivial cell:        median {statistics.median(trivial):.2f}s over {args.n} runs (min {min(trivial):.2f}s, max {max(trivial):.2f}s)")
    print(f"project-import cell: median {statistics.median(project):.2f}s over {args.n} runs (min {min(project):.2f}s, max {max(project):.2f}s)")
    print(f"plan-and-chart cell: median {statistics.median(plan):.2f}s over {args.n} runs (min {min(plan):.2f}s, max {max(plan):.2f}s)")


if __name__ == "__main__":
    main()
