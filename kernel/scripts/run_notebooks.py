"""Execute notebooks headless through their kernel (the real vramlab kernel)
and fail on any error output.

    .venv/bin/python kernel/scripts/run_notebooks.py [-o OUTDIR] NOTEBOOK_OR_DIR...

Each notebook runs in a fresh kernel, cell by cell, as nbconvert --execute
would; two notebooks at a time (-j). A cell fails the run if it produces an error output, or writes a Go
panic or a failed build to stderr (gonb reports some of those as stderr text).
The executed notebooks are written to OUTDIR (default .artifacts/executed) so a
person can look at them; the timings are printed at the end.
"""

import argparse
import multiprocessing
import os
import pathlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

# Text in stderr that means a cell failed even if gonb did not raise an error.
FATAL_MARKERS = ("panic:", "goroutine ", "exit status", "undefined:", "cannot find package")


def notebooks(paths):
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            yield from sorted(q for q in p.glob("*.ipynb") if not q.name.startswith("."))
        else:
            yield p


def stderr_failures(nb):
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = out.get("text", "")
                if any(m in text for m in FATAL_MARKERS):
                    yield i, text


def html_errors(nb):
    """gonb reports build errors as HTML; return their text."""
    import html as htmllib
    import re
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            h = out.get("data", {}).get("text/html", "")
            if "gonb-err" in h:
                h = re.sub(r"<style>.*?</style>", "", h, flags=re.S)
                yield i, htmllib.unescape(re.sub(r"<[^>]+>", "", h)).strip()


def untranslated_charts(nb):
    """A Chinese tutorial's charts speak Chinese: each chart's title (its
    fallback table's caption) has Chinese in it."""
    import re
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            h = out.get("data", {}).get("text/html", "")
            h = "".join(h) if isinstance(h, list) else h
            for cap in re.findall(r'<table class="vramlab-fallback"[^>]*><caption[^>]*>(.*?)</caption>', h):
                if not re.search(r"[\u4e00-\u9fff]", cap):
                    yield i, cap


def run_one(path, outdir, timeout):
    """Run one notebook in a fresh kernel; return (label, seconds, cells, error or None)."""
    nb = nbformat.read(path, as_version=4)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "vramlab")
    client = NotebookClient(nb, kernel_name=kernel, timeout=timeout,
                            resources={"metadata": {"path": str(path.parent)}})
    # A notebook in a zh/ folder is a Chinese tutorial: its charts speak
    # Chinese (in JupyterLab the kernel learns it from the notebook's path).
    chinese = path.parent.name == "zh"
    if chinese:
        os.environ["VRAMLAB_LANG"] = "zh"
    else:
        os.environ.pop("VRAMLAB_LANG", None)
    start = time.monotonic()
    err = None
    try:
        client.execute()
    except CellExecutionError as e:
        err = str(e)
    except Exception as e:  # kernel died, timeout, ...
        err = f"{type(e).__name__}: {e}"
    seconds = time.monotonic() - start
    label = ("zh/" if chinese else "") + path.name
    (outdir / label).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, outdir / label)
    for i, text in stderr_failures(nb):
        err = (err or "") + f"\ncell {i} wrote to stderr:\n{text}"
    if chinese:
        for i, cap in untranslated_charts(nb):
            err = (err or "") + f"\ncell {i}: a chart's title is not in Chinese: {cap}"
    if err:
        for i, text in html_errors(nb):
            err += f"\ncell {i} build error:\n{text[:3000]}"
    return label, seconds, len(nb.cells), err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("-o", "--outdir", default=".artifacts/executed")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    # Two at a time on a two-core machine: a cell's time is mostly its
    # program's build, one core each, so two notebooks take little longer
    # than one (each notebook is its own process, with its own kernel).
    ap.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    outdir = pathlib.Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)

    paths = list(notebooks(args.paths))
    failed, timings = [], {}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_one, path, outdir, args.timeout): path for path in paths}
        for fut in as_completed(futures):
            path = futures[fut]
            try:
                label, seconds, cells, err = fut.result()
            except Exception as e:  # the worker itself died
                label, seconds, cells, err = str(path), 0.0, 0, f"{type(e).__name__}: {e}"
            timings[path] = (label, seconds)
            if err:
                failed.append(path.name)
                print(f"FAIL {path} ({seconds:.1f}s)\n{err}\n", flush=True)
            else:
                print(f"ok   {path} ({seconds:.1f}s, {cells} cells)", flush=True)

    print("\nnotebook execution times:")
    for path in paths:
        name, s = timings[path]
        print(f"  {s:6.1f}s  {name}")
    print(f"\nnotebooks: {len(timings) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed or not timings else 0


if __name__ == "__main__":
    sys.exit(main())
