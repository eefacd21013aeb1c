"""A reader's mistake in a cell reads as one line, in the real kernel.

    .venv/bin/python kernel/scripts/cell_errors.py

Runs a notebook whose plan names a model that does not exist (a typo), in
the vramlab kernel, and checks what each cell shows: the error once, with
its closest matches, the exit status once (the cell's error output; the
kernel's gonb does not repeat it on stderr), and no goroutine trace or
temporary file path; a later
cell that uses the same plan says the same. A sweep of that plan reports the
error instead of drawing an empty chart.
"""

import sys

import nbformat
from nbclient import NotebookClient

CELLS = [
    '''import (
	"fmt"

	"github.com/vramlab/vramlab/charts"
	"github.com/vramlab/vramlab/vram"
)

var plan = vram.Training{Model: vram.FromPreset("llama-2-7bb"), SeqLen: 512, MicroBatch: 1}

%%
est, err := plan.Estimate()
charts.Must(err)
fmt.Println(est.Peak.Total())''',
    '''%%
ms, err := plan.ModelStates()
charts.Must(err)
fmt.Println(ms.Parameters)''',
    '''%%
pts, err := vram.Sweep(plan, "micro_batch", []string{"1", "2"})
charts.Must(err)
charts.Show(charts.Sweep("micro_batch", pts, 0))''',
]
WANT = 'unknown model preset "llama-2-7bb"; did you mean "llama-2-7b"'


def outputs_text(cell):
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(out.get("ename", "") + ": " + out.get("evalue", "") + "\n" + "\n".join(out.get("traceback", [])))
        else:
            parts.append(str(out.get("data", {}).get("text/html", "")) + str(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def main():
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "vramlab", "display_name": "VRAM Lab (Go)", "language": "go"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    NotebookClient(nb, kernel_name="vramlab", timeout=300, allow_errors=True).execute()
    bad = []
    for i, cell in enumerate(nb.cells):
        text = outputs_text(cell)
        if text.count(WANT) != 1:
            bad.append(f"cell {i}: the error should appear exactly once, got:\n{text}")
        streams = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        if "exit status" in streams:
            bad.append(f"cell {i}: the exit status is repeated on the cell's stream besides its error output:\n{text}")
        for junk in ("goroutine", "panic:", "/tmp/", "gonb_"):
            if junk in text:
                bad.append(f"cell {i}: shows {junk!r}:\n{text}")
    if "-v" in sys.argv:
        for i, cell in enumerate(nb.cells):
            print(f"--- cell {i}\n{outputs_text(cell)}")
    if bad:
        print("\n\n".join(bad), file=sys.stderr)
        sys.exit(1)
    print("ok: each cell shows the typo's error once, with its closest matches, and no trace")


if __name__ == "__main__":
    main()
