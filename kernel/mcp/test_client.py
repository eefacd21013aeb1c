"""Drives VRAM Lab's MCP server (examples/mcp) with the reference MCP client SDK.

    python kernel/mcp/test_client.py SERVER PLAN_CLI

SERVER is the built examples/mcp, PLAN_CLI the built examples/plan. Both
protocol eras are spoken (2026-07-28's server/discover, and the
initialize handshake); the tools are listed and each is called: estimate
and fit on every example plan equal `plan -json` on the same plan, import
on a trainer's config equals `plan -json` on the file (and its plan_file
estimates to the same answer), search on the search example equals
`plan -json` on it, every answer validates against report.schema.json,
and hostile inputs get the errors the CLI gives, naming the field.
"""

import asyncio
import glob
import json
import os
import subprocess
import sys

import jsonschema
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ["estimate", "explain_log", "fit", "gpus", "import", "presets", "search"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL", what, flush=True)


def plan_json(cli, *args):
    """plan -json's answer (exit 1 is a verdict, not an error)."""
    p = subprocess.run([cli, "-json", *args], capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"plan -json {args}: {p.stderr}")
    return json.loads(p.stdout)


async def session(server, cli, mode, validator):
    async with Client(StdioServerParameters(command=server), mode=mode) as c:
        want_version = "2026-07-28" if mode == "auto" else "2025-11-25"
        check(c.session.protocol_version == want_version, f"{mode}: negotiated {c.session.protocol_version}, want {want_version}")
        listed = await c.list_tools()
        names = sorted(t.name for t in listed.tools)
        check(names == TOOLS, f"{mode}: tools {names}")
        for t in listed.tools:
            check(t.input_schema.get("type") == "object" and t.description, f"{mode}: {t.name} has no object input schema or description")

        async def call(tool, args):
            r = await c.call_tool(tool, args)
            if not r.is_error:
                check(json.loads(r.content[0].text) == r.structured_content, f"{mode} {tool}: the text is not the answer's JSON")
            return r

        plans = sorted(glob.glob(os.path.join(ROOT, "examples/plans/*.json")))
        check(len(plans) >= 10, f"{len(plans)} example plans")
        for f in plans:
            plan = json.load(open(f))
            r = await call("estimate", {"plan": plan})
            check(not r.is_error and r.structured_content == plan_json(cli, f), f"{mode} estimate {os.path.basename(f)} != plan -json")
            validator.validate(r.structured_content)
            r = await call("fit", {"plan": plan, "gpu": "RTX-4090"})
            check(not r.is_error and r.structured_content == plan_json(cli, "-gpu", "RTX-4090", f), f"{mode} fit {os.path.basename(f)} != plan -json -gpu RTX-4090")
            check(r.structured_content.get("fit") is not None, f"{mode} fit {os.path.basename(f)}: no verdict")

        cfg = os.path.join(ROOT, "vram/importer/testdata/configs/axolotl/llama-3__qlora.yml")
        r = await call("import", {"config": open(cfg).read(), "name": "llama-3__qlora.yml", "gpu": "RTX-4090"})
        check(not r.is_error and r.structured_content == plan_json(cli, "-gpu", "RTX-4090", cfg), f"{mode} import != plan -json on the file")
        validator.validate(r.structured_content)
        imported = dict(r.structured_content)
        r = await call("estimate", {"plan": imported.pop("plan_file")})
        imported.pop("import")
        unflagged = lambda rep: {**rep, "advice": [{k: v for k, v in a.items() if k != "flags"} for a in rep.get("advice", [])]}
        # the advice's flags are said in the config's keys for the import, in the plan's framework's for the plan file
        check(not r.is_error and unflagged(r.structured_content) == unflagged(imported), f"{mode} import's plan_file does not estimate to import's answer")

        log = ("INFO vLLM server version 0.33.0, serving model meta-llama/Llama-3.1-8B-Instruct\n"
               "INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192}\n"
               "INFO Model loading took 14.99 GiB memory and 5.2 seconds\nINFO Available KV cache memory: 52.34 GiB\n")
        r = await call("explain_log", {"log": log, "gpu": "H100-80GB"})
        check(not r.is_error and [x["what"] for x in r.structured_content["checks"]] == ["weights", "kv_cache"], f"{mode} explain_log: {r.content[0].text[:300]}")
        searched = os.path.join(ROOT, "examples/search/llama3.1-405b-h100.json")
        r = await call("search", {"plan": json.load(open(searched)), "top": 5})
        check(not r.is_error and r.structured_content == plan_json(cli, "-top", "5", searched), f"{mode} search != plan -json -top 5 on the search example")
        check(not r.is_error and all(l["fits"] and "--parallelism" in l["launch"] for l in r.structured_content["layouts"]), f"{mode} search: a layout that does not fit or has no launch flags")
        r = await call("presets", {"contains": "llama-3.1"})
        check(not r.is_error and len(r.structured_content["presets"]) >= 3, f"{mode} presets")
        r = await call("gpus", {})
        check(not r.is_error and any(g["name"] == "H100-80GB" for g in r.structured_content["gpus"]), f"{mode} gpus")

        deep = {"a": 1}
        for _ in range(200):
            deep = {"a": deep}
        for tool, args, want in [
            ("estimate", {"plan": {"model": "llama-3-8b"}, "extra": 1}, "arguments.extra: unknown field"),
            ("estimate", {"plan": {"model": {"hf_config": "/etc/passwd"}, "inference": {"batch": 1}}}, "model.hf_config: a path"),
            ("estimate", {"plan": {"model": "hf://meta-llama/Llama-3.1-8B", "inference": {"batch": 1}}}, "needs the network"),
            ("estimate", {"plan": {"model": "llama-3-8b", "inference": deep}}, "arguments.plan"),
            ("estimate", {"plan": {"model": "llama-3-8b", "name": "x" * (1 << 20), "inference": {"batch": 1}}}, "more than a plan's"),
            ("import", {"config": "x", "name": "../../etc/passwd"}, "arguments.name: a file name, not a path"),
            ("fit", {"plan": {"model": "llama-3-8b", "inference": {"batch": 1}}}, "arguments.gpu: fit needs a GPU"),
            ("search", {"plan": {"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1}, "gpu": "H100-80GB"}}, "arguments.gpus: required"),
        ]:
            r = await c.call_tool(tool, args)
            check(r.is_error and want in r.content[0].text, f"{mode} {tool} hostile: {r.content[0].text[:200]!r}, want {want!r}")


def main():
    server, cli = sys.argv[1], sys.argv[2]
    schema = json.load(open(os.path.join(ROOT, "vram/answer/report.schema.json")))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for mode in ("auto", "legacy"):
        asyncio.run(session(server, cli, mode, validator))
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        sys.exit(1)
    print("ok: both protocol eras, seven tools, estimate and fit equal plan -json on every example plan, search equals plan -json on the search example")


if __name__ == "__main__":
    main()
