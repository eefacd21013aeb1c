"""Keep the Chinese tutorials (notebooks/zh/) in step with the English ones.

    .venv/bin/python kernel/scripts/zh_sync.py --check   # the test command runs this
    .venv/bin/python kernel/scripts/zh_sync.py --sync    # after changing an English tutorial's code

A Chinese tutorial has the same cells as its English original, in the same
order: identical code cells (source and tags), so the two cannot compute
different things, and its own markdown, in Chinese. --check fails when a
tutorial has no Chinese edition, when the cells' kinds or order differ, when
a code cell differs, or when a markdown cell has no Chinese in it (left
untranslated). --sync copies the English code cells into the Chinese
notebooks (the markdown is left for a translator) and then checks.
"""

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
EN = ROOT / "notebooks"
ZH = EN / "zh"
# The report templates are for teams' reports, in English; every other
# notebook is a tutorial or the playground and has a Chinese edition.
NOT_TRANSLATED = {"30-training-plan-report.ipynb", "31-plan-comparison.ipynb"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def source(cell):
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def problems():
    out = []
    for en in sorted(EN.glob("*.ipynb")):
        if en.name in NOT_TRANSLATED:
            continue
        zh = ZH / en.name
        if not zh.exists():
            out.append(f"{en.name}: no Chinese edition in notebooks/zh/")
            continue
        a, b = json.loads(en.read_text()), json.loads(zh.read_text())
        kinds_a = [c["cell_type"] for c in a["cells"]]
        kinds_b = [c["cell_type"] for c in b["cells"]]
        if kinds_a != kinds_b:
            out.append(f"zh/{en.name}: cells {kinds_b} differ from the English {kinds_a}")
            continue
        for i, (x, y) in enumerate(zip(a["cells"], b["cells"])):
            if x["cell_type"] == "code" and (source(x) != source(y) or tags(x) != tags(y)):
                out.append(f"zh/{en.name}: code cell {i} differs from the English one (run --sync)")
            if x["cell_type"] == "markdown" and not CJK.search(source(y)):
                out.append(f"zh/{en.name}: markdown cell {i} is not in Chinese")
    for zh in sorted(ZH.glob("*.ipynb")):
        if not (EN / zh.name).exists():
            out.append(f"zh/{zh.name}: no English original")
    return out


def sync():
    for zh in sorted(ZH.glob("*.ipynb")):
        en = EN / zh.name
        if not en.exists():
            continue
        a, b = json.loads(en.read_text()), json.loads(zh.read_text())
        if [c["cell_type"] for c in a["cells"]] != [c["cell_type"] for c in b["cells"]]:
            continue  # reported by the check: a translator must place the cells
        for x, y in zip(a["cells"], b["cells"]):
            if x["cell_type"] == "code":
                y["source"], y["metadata"] = x["source"], x["metadata"]
        zh.write_text(json.dumps(b, indent=1, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sync", action="store_true", help="copy the English code cells into the Chinese tutorials first")
    ap.add_argument("--check", action="store_true", help="only check (the default)")
    args = ap.parse_args()
    if args.sync:
        sync()
    bad = problems()
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)
    n = len(list(ZH.glob("*.ipynb")))
    print(f"ok: {n} Chinese tutorials, code cells identical to the English ones")


if __name__ == "__main__":
    main()
