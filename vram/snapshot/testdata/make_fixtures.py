"""Writes the snapshot fixtures in vram/snapshot/testdata: pickles built
from the format torch/cuda/memory.py documents (_snapshot's TypedDicts:
Snapshot, Segment, Block, Frame, TraceEntry), with Python's own pickle at
each protocol, covering every trace action and every frame shape. Run it
again after changing it: python3 make_fixtures.py (standard library only)."""
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))

MiB = 1 << 20


def py(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


def cpp(name):
    # C++ frames (stacks="all"): no file the interpreter knows.
    return {"filename": "??", "line": 0, "name": name}


def fx(filename, line, name):
    # augment_with_fx_traces=True adds FX debug fields to generated code.
    f = py(filename, line, name)
    f.update({"fx_node_op": "call_function", "fx_node_name": "mm_1",
              "fx_original_trace": 'File "model.py", line 12, in forward\n    return self.proj(x)'})
    return f


USER = py("train.py", 40, "<module>")
FWD = [py("/usr/lib/python3/site-packages/torch/nn/modules/linear.py", 125, "forward"),
       py("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1750, "_call_impl"),
       py("model.py", 12, "forward"), USER]
BWD = [cpp("at::native::mm(at::Tensor const&, at::Tensor const&)"),
       cpp("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"),
       cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
       cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)")]
OPT = [py("/usr/lib/python3/site-packages/torch/optim/adamw.py", 480, "_multi_tensor_adamw"),
       py("/usr/lib/python3/site-packages/torch/optim/optimizer.py", 493, "wrapper"),
       py("train.py", 44, "<module>")]
INIT = [py("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1340, "convert"),
        py("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 915, "_apply"),
        py("/usr/lib/python3/site-packages/torch/nn/modules/module.py", 1355, "to"),
        py("train.py", 30, "<module>")]
DATA = [py("train.py", 38, "<module>")]
COMPILED = [fx("/tmp/torchinductor_root/ab/cabc123.py", 88, "call"), USER]


def trace(*steps):
    """Trace entries from (action, addr, size, frames[, extra]) steps."""
    out, t = [], 1_700_000_000_000_000
    for s in steps:
        action, addr, size, frames = s[:4]
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": frames}
        if len(s) > 4:
            e.update(s[4])
        if action == "oom":
            del e["addr"]
        out.append(e)
        t += 10
    return out


def block(addr, size, state, frames, requested=None):
    return {"address": addr, "size": size, "requested_size": requested or size, "state": state, "frames": frames}


def segment(addr, total, blocks, kind="large", device=0):
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": addr, "total_size": total, "stream": 0, "segment_type": kind,
            "segment_pool_id": (0, 0), "allocated_size": alloc, "active_size": active,
            "requested_size": alloc, "is_expandable": False, "frames": [], "blocks": blocks}


def training():
    """One tiny training step on one device: weights (setup), a batch,
    forward activations and a transient, backward gradients (kept) and
    scratch (freed), AdamW states (kept) and scratch, zero_grad, with
    segment_alloc/segment_free and a phase marker (user_metadata) on some
    entries, a free that completes later (another stream), an annotate, a
    snapshot and an oom entry."""
    S1, S2, S3 = 0x7F0000000000, 0x7F0010000000, 0x7F0020000000
    W, X, A1, A2, TMP = S1, S1 + 4 * MiB, S2, S2 + 2 * MiB, S2 + 6 * MiB
    G, GS = S1 + 8 * MiB, S2 + 8 * MiB
    M1, M2, OS = S3, S3 + 4 * MiB, S3 + 8 * MiB
    steps = [
        ("segment_alloc", S1, 20 * MiB, INIT),
        ("alloc", W, 4 * MiB, INIT),                          # a weight
        ("alloc", X, 1 * MiB, DATA),                          # the batch
        ("segment_alloc", S2, 20 * MiB, FWD, {"user_metadata": "forward"}),
        ("alloc", A1, 2 * MiB, FWD, {"user_metadata": "forward"}),  # saved for backward
        ("alloc", A2, 2 * MiB, FWD, {"user_metadata": "forward"}),  # saved for backward
        ("alloc", TMP, 1 * MiB, COMPILED, {"user_metadata": "forward"}),  # transient
        ("free_requested", TMP, 1 * MiB, COMPILED, {"user_metadata": "forward"}),
        ("free_completed", TMP, 1 * MiB, COMPILED, {"user_metadata": "forward"}),
        ("alloc", G, 4 * MiB, BWD, {"user_metadata": "backward"}),  # the weight's gradient
        ("alloc", GS, 2 * MiB, BWD, {"user_metadata": "backward"}),  # scratch
        ("free_requested", A2, 2 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_completed", A2, 2 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_requested", GS, 2 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_requested", A1, 2 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_completed", A1, 2 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_completed", GS, 2 * MiB, [], {"user_metadata": "backward"}),  # completed later, no frames
        ("segment_alloc", S3, 20 * MiB, OPT, {"user_metadata": "optimizer"}),
        ("alloc", M1, 4 * MiB, OPT, {"user_metadata": "optimizer"}),  # exp_avg
        ("alloc", M2, 4 * MiB, OPT, {"user_metadata": "optimizer"}),  # exp_avg_sq
        ("alloc", OS, 4 * MiB, OPT, {"user_metadata": "optimizer"}),  # foreach scratch
        ("free_requested", OS, 4 * MiB, OPT, {"user_metadata": "optimizer"}),
        ("free_completed", OS, 4 * MiB, OPT, {"user_metadata": "optimizer"}),
        ("annotate", M1, 0, OPT, {"user_metadata": "exp_avg"}),
        ("free_requested", G, 4 * MiB, [py("/usr/lib/python3/site-packages/torch/optim/optimizer.py", 980, "zero_grad")], {"user_metadata": "zero_grad"}),
        ("free_completed", G, 4 * MiB, [], {"user_metadata": "zero_grad"}),
        ("segment_free", S2, 20 * MiB, [py("/usr/lib/python3/site-packages/torch/cuda/memory.py", 222, "empty_cache")]),
        ("oom", 0, 64 * 1024 * MiB, FWD, {"device_free": 12 * MiB, "user_metadata": "forward"}),
        ("snapshot", 0, 0, []),
    ]
    segs = [
        segment(S1, 20 * MiB, [block(W, 4 * MiB, "active_allocated", INIT), block(X, 1 * MiB, "active_allocated", DATA, 1000000),
                               block(S1 + 5 * MiB, 15 * MiB, "inactive", [])]),
        segment(S3, 20 * MiB, [block(M1, 4 * MiB, "active_allocated", OPT), block(M2, 4 * MiB, "active_allocated", OPT),
                               block(OS, 12 * MiB, "inactive", [])]),
        segment(0x7F0030000000, 2 * MiB, [block(0x7F0030000000, 512, "active_allocated", DATA), block(0x7F0030000200, 2 * MiB - 512, "inactive", [])], "small"),
    ]
    return {"segments": segs, "device_traces": [trace(*steps)], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}}


def legacy():
    """PyTorch 2.0's format: blocks carry a history of (addr, real_size,
    frames) instead of frames and requested_size; no device_traces entries."""
    seg = {"device": 0, "address": 0x7F0000000000, "total_size": 2 * MiB, "stream": 0, "segment_type": "large",
           "allocated_size": MiB, "active_size": MiB,
           "blocks": [{"address": 0x7F0000000000, "size": MiB, "state": "active_allocated",
                       "history": [{"addr": 0x7F0000000000, "real_size": 1000000, "frames": INIT}]},
                      {"address": 0x7F0000100000, "size": MiB, "state": "inactive"}]}
    return {"segments": [seg], "device_traces": [[]]}


def two_devices():
    """Two devices, the second's trace empty (recording on device 0 only)."""
    d = training()
    d["device_traces"].append([])
    return d


def expandable():
    """expandable_segments:True: one segment that grows by mapping pages
    (segment_map) and shrinks by unmapping them (segment_unmap)."""
    S = 0x7F0000000000
    steps = [
        ("segment_map", S, 20 * MiB, INIT),
        ("alloc", S, 16 * MiB, INIT),
        ("segment_map", S + 20 * MiB, 20 * MiB, FWD, {"user_metadata": "forward"}),
        ("alloc", S + 16 * MiB, 20 * MiB, FWD, {"user_metadata": "forward"}),
        ("free_requested", S + 16 * MiB, 20 * MiB, BWD, {"user_metadata": "backward"}),
        ("free_completed", S + 16 * MiB, 20 * MiB, BWD, {"user_metadata": "backward"}),
        ("segment_unmap", S + 20 * MiB, 20 * MiB, [py("/usr/lib/python3/site-packages/torch/cuda/memory.py", 222, "empty_cache")]),
    ]
    seg = segment(S, 20 * MiB, [block(S, 16 * MiB, "active_allocated", INIT), block(S + 16 * MiB, 4 * MiB, "inactive", [])])
    seg["is_expandable"] = True
    return {"segments": [seg], "device_traces": [trace(*steps)]}


def main():
    os.makedirs(HERE, exist_ok=True)
    cases = {"training": training(), "legacy": legacy(), "two-devices": two_devices(), "expandable": expandable()}
    for name, data in cases.items():
        for proto in (0, 2, 4, 5):
            with open(os.path.join(HERE, f"{name}.p{proto}.pickle"), "wb") as f:
                pickle.dump(data, f, protocol=proto)
    # Not snapshots: a pickle that builds objects (what a torch.save file
    # holds), a truncated one, a list, and something that is no pickle.
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    with open(os.path.join(HERE, "not-a-snapshot.reduce.pickle"), "wb") as f:
        pickle.dump({"segments": [Evil()]}, f, protocol=4)
    full = pickle.dumps(training(), protocol=4)
    with open(os.path.join(HERE, "not-a-snapshot.truncated.pickle"), "wb") as f:
        f.write(full[: len(full) // 2])
    with open(os.path.join(HERE, "not-a-snapshot.list.pickle"), "wb") as f:
        pickle.dump([1, 2, 3], f, protocol=4)
    with open(os.path.join(HERE, "not-a-snapshot.json"), "w") as f:
        f.write('{"segments": []}\n')


if __name__ == "__main__":
    main()
