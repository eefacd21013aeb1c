"""What torchtitan 0.3.0's MoE layer saves for backward, traced on the CPU.

    python examples/measure/torchtitan_moe.py --torchtitan DIR [--ep 2] [-o OUT.json]

DIR holds the torchtitan package of the wheel `pip download torchtitan==0.3.0
--no-deps` (unzipped); it imports spmd_types (0.2.3) and tyro besides torch.

Each case builds torchtitan.models.common.moe.MoE (the router, the
LocalTokenDispatcher torchtitan runs at expert parallelism 1 — an
AllToAllTokenDispatcher without an EP mesh falls back to it, token_dispatcher.py
l.402-410 — GroupedExperts through torch._grouped_mm, which runs on the CPU,
the optional shared experts), its parameters in bf16 as FSDP2's param_dtype
all-gathers them, its buffers fp32, and runs one forward and backward on a
bf16 input of B x L tokens routed evenly by the real router: the gate's weight
is the identity on the first E input features and token t's input is small
noise plus 4 on features (t*K+k) mod E, k < K, so its top K experts are those
and every expert gets T*K/E tokens (_debug_force_load_balance, moe.py
l.225-240, would do the same but saves a second index tensor). It records:

  saved     every storage autograd saves (torch.autograd.graph.saved_tensors_hooks),
            once per storage, parameters and buffers left out: bytes, dtype,
            shape and the autograd node that saved it.
  forward_peak / backward_peak
            the most bytes of storages created during the forward (backward)
            live at once, as a TorchDispatchMode sees the ops create and free
            them (the input and the parameters left out).

With --ep N the cases run on N CPU processes over gloo, each holding E/N
experts, through AllToAllTokenDispatcher with an EP mesh of the N ranks
(token_dispatcher.py l.372-499 dispatch, l.562-628 combine): the functional
all_to_all_single, the _permute from rank-major to expert-major order and its
reverse. torchtitan's default SPMD backend ("spmd_types") takes the process
group from its own mesh registry; the trace sets the plain backend
(set_spmd_backend("dtensor")), which runs the same all_to_all_single ops on
the dispatcher's mesh. Rank 0's numbers are reported.

One emulation: the router computes its gate under torch.autocast(dtype=float32)
(moe.py l.298-299). CUDA autocast honours float32 (F.linear casts input and
weight to fp32 copies, which mm saves); CPU autocast refuses it and runs the
gate in bf16. The trace replaces the gate's forward by
F.linear(x.float(), weight.float()), which is what CUDA autocast does.
"""

import argparse
import json
import sys
import weakref


def build(tt, cfg, ep=1, mesh=None):
    import torch

    from torchtitan.models.common.feed_forward import FeedForward
    from torchtitan.models.common.linear import Linear
    from torchtitan.models.common.moe import (GroupedExperts, MoE, RoutedExperts,
                                              TokenChoiceTopKRouter)
    from torchtitan.models.common.token_dispatcher import AllToAllTokenDispatcher

    E, K, D, F = cfg["experts"], cfg["top_k"], cfg["dim"], cfg["hidden"]
    shared = None
    if cfg.get("shared_hidden"):
        S = cfg["shared_hidden"]
        shared = FeedForward.Config(w1=Linear.Config(in_features=D, out_features=S),
                                    w2=Linear.Config(in_features=S, out_features=D),
                                    w3=Linear.Config(in_features=D, out_features=S))
    c = MoE.Config(
        num_experts=E,
        routed_experts=RoutedExperts.Config(
            inner_experts=GroupedExperts.Config(dim=D, hidden_dim=F, num_experts=E // ep),
            token_dispatcher=AllToAllTokenDispatcher.Config(num_experts=E, top_k=K)),
        router=TokenChoiceTopKRouter.Config(
            num_experts=E, gate=Linear.Config(in_features=D, out_features=E), top_k=K,
            score_func=cfg["score_func"], route_norm=cfg["route_norm"],
            route_scale=cfg.get("route_scale", 1.0),
            num_expert_groups=cfg.get("groups"), num_limited_groups=cfg.get("limited_groups")),
        load_balance_coeff=1e-3,
        shared_experts=shared)
    moe = c.build()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_(0, 0.02)
            p.data = p.data.to(torch.bfloat16)
        moe.router.gate.weight.zero_()
        moe.router.gate.weight[:, :E] = torch.eye(E)
    if mesh is not None:
        moe.routed_experts.token_dispatcher.wire_meshes(ep_mesh=mesh)
    gate = moe.router.gate
    gate.forward = lambda x: torch.nn.functional.linear(x.float(), gate.weight.float())
    moe.train()
    return moe


def run(tt, cfg, ep=1, mesh=None):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    moe = build(tt, cfg, ep, mesh)
    B, L, D = cfg["batch"], cfg["seq"], cfg["dim"]
    E, K = cfg["experts"], cfg["top_k"]
    x = torch.randn(B * L, D) * 0.01
    for t in range(B * L):
        for k in range(K):
            x[t, (t * K + k) % E] += 4
    x = x.view(B, L, D).to(torch.bfloat16).requires_grad_()
    owned = {q.untyped_storage().data_ptr() for q in moe.parameters()}
    owned |= {q.untyped_storage().data_ptr() for q in moe.buffers()}
    owned.add(x.untyped_storage().data_ptr())

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live, self.cur, self.peak = {}, 0, 0

        def reset(self):
            self.peak = self.cur

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                t = getattr(t, "elem", t)  # AsyncCollectiveTensor: its wrapped result
                st = t.untyped_storage()
                try:
                    k = st.data_ptr()
                except RuntimeError:
                    continue
                if k in self.live or k in owned or st.nbytes() == 0:
                    continue
                self.live[k] = st.nbytes()
                self.cur += st.nbytes()
                self.peak = max(self.peak, self.cur)
                weakref.finalize(st, self.free, k)
            return out

        def free(self, k):
            self.cur -= self.live.pop(k, 0)

    saved = {}

    def pack(t):
        st = getattr(t, "elem", t).untyped_storage()
        k = st.data_ptr()
        if k not in owned and k not in saved:
            saved[k] = {"bytes": st.nbytes(), "dtype": str(t.dtype).replace("torch.", ""),
                        "shape": list(t.shape)}
        return t

    mode = Live()
    with mode:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = moe(x)
        fwd_peak, after_fwd = mode.peak, mode.cur
        g = torch.ones_like(y)
        mode.reset()
        base = mode.cur
        y.backward(g)
        bwd_peak = mode.peak - base
    counts = moe.tokens_per_expert_E.tolist()
    if counts != [B * L * K / E] * E:
        raise SystemExit(f"routing not balanced: {counts}")
    # Name each saved storage by the autograd nodes that hold it.
    names = {}
    seen, stack = set(), [y.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(n for n, _ in fn.next_functions)
    # (the graph is freed by backward; names come from a second forward)
    if mesh is not None:
        return {"config": cfg, "ep": ep, "saved_bytes": sum(r["bytes"] for r in saved.values()),
                "saved": sorted(saved.values(), key=lambda r: -r["bytes"]),
                "forward_peak": fwd_peak, "after_forward": after_fwd, "backward_peak": bwd_peak}
    y2 = moe(x)
    seen, stack = set(), [y2.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for a in dir(fn):
            if a.startswith("_saved_"):
                try:
                    v = getattr(fn, a)
                except Exception:
                    continue
                for t in (v if isinstance(v, (tuple, list)) else [v]):
                    if isinstance(t, torch.Tensor):
                        names.setdefault((t.untyped_storage().nbytes(), str(t.dtype).replace("torch.", ""), tuple(t.shape)), []).append(f"{fn.name()}.{a[7:]}")
        stack.extend(n for n, _ in fn.next_functions)
    rows = sorted(saved.values(), key=lambda r: -r["bytes"])
    for r in rows:
        r["saved_by"] = sorted(set(names.get((r["bytes"], r["dtype"], tuple(r["shape"])), [])))
    return {"config": cfg, "saved_bytes": sum(r["bytes"] for r in rows), "saved": rows,
            "forward_peak": fwd_peak, "after_forward": after_fwd, "backward_peak": bwd_peak}


CASES = [
    # Qwen3-MoE's router (softmax, route_norm), no shared expert.
    {"name": "softmax-norm", "experts": 8, "top_k": 2, "dim": 64, "hidden": 32, "batch": 2, "seq": 16,
     "score_func": "softmax", "route_norm": True},
    # DeepSeek-V3's (sigmoid, route_norm, route_scale 2.5) with a shared expert.
    {"name": "sigmoid-norm-shared", "experts": 8, "top_k": 2, "dim": 64, "hidden": 32, "batch": 2, "seq": 16,
     "score_func": "sigmoid", "route_norm": True, "route_scale": 2.5, "shared_hidden": 32},
    # Plain sigmoid top-k (the router's defaults: no norm).
    {"name": "sigmoid", "experts": 8, "top_k": 2, "dim": 64, "hidden": 32, "batch": 2, "seq": 16,
     "score_func": "sigmoid", "route_norm": False},
    # Group-limited routing (DeepSeek-V3 671B's 8 groups, 4 kept; here 4 and 2).
    {"name": "sigmoid-groups", "experts": 8, "top_k": 2, "dim": 64, "hidden": 32, "batch": 2, "seq": 16,
     "score_func": "sigmoid", "route_norm": True, "groups": 4, "limited_groups": 2},
]


def ep_worker(rank, ep, path, port, q):
    import os

    sys.path.insert(0, path)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import torchtitan
    from torchtitan.distributed.utils import set_spmd_backend

    dist.init_process_group("gloo", rank=rank, world_size=ep)
    set_spmd_backend("dtensor")
    mesh = init_device_mesh("cpu", (ep,), mesh_dim_names=("ep",))
    out = [run(torchtitan, c, ep, mesh) for c in CASES]
    if rank == 0:
        q.put(out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchtitan", required=True)
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    sys.path.insert(0, a.torchtitan)
    import torch
    import torchtitan  # noqa: F401

    if a.ep > 1:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=ep_worker, args=(r, a.ep, a.torchtitan, 29517, q)) for r in range(a.ep)]
        for p in procs:
            p.start()
        cases = q.get()
        for p in procs:
            p.join()
    else:
        cases = [run(torchtitan, c) for c in CASES]
    out = {"torch": torch.__version__, "torchtitan": "0.3.0", "ep": a.ep, "cases": cases}
    s = json.dumps(out, indent=1) + "\n"
    if a.out:
        open(a.out, "w").write(s)
    else:
        sys.stdout.write(s)


if __name__ == "__main__":
    main()
