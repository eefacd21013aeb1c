package vram

import "fmt"

// NCCL and the custom all-reduce of a serving engine with tensor
// parallelism (tp > 1), counted where the engine measures its memory.
// Each TP rank's group builds, when the engine initialises its parallel
// groups, a PyNcclCommunicator — ncclCommInitRank, then a one-element
// all-reduce to warm it up (SGLang 0.5.3 distributed/device_communicators/
// pynccl.py:115-117, 0.5.23 l.134-137; vLLM 0.11.0 l.137-139) — and a
// CustomAllreduce (below). What NCCL holds then is nccl.go's rule for a TP
// communicator of tp ranks in the node that has run the warm-up
// (ncclWarmUp), under the NCCL release the engine's torch pins and the
// environment the engine sets.
//
// SGLang measures the free memory that sizes its pool after that (0.5.3
// srt/model_executor/model_runner.py:679-698, 0.5.23 srt/distributed/
// bootstrap.py:90-223), with NCCL_CUMEM_ENABLE=0 and NCCL_NVLS_ENABLE=0
// (0.5.3 srt/entrypoints/engine.py:674-676; 0.5.23 l.1898-1915 with
// --enable-symm-mem and the KV-shard gather off): without cuMem NCCL
// connects every algorithm at init (init.cc:1148 at v2.27.3-1).
//
// vLLM takes its init snapshot after the parallel groups (0.11.0
// v1/worker/gpu_worker.py:165-182, 0.14.1 l.213-234, 0.33.0 l.500-541), so
// their NCCL and custom all-reduce buffers stay outside the budget; its
// profile's non-torch increase counts what the profile run adds. 0.9.2
// takes it before them (v1/worker/gpu_worker.py:140 before 158), so its
// non-torch increase holds the warmed-up PyNcclCommunicator (pynccl.py:
// 99-106) and the custom all-reduce's IPC buffers (customAllReduceIPC)
// too, and it sets NCCL_CUMEM_ENABLE=0 (env_override.py:16-32), which
// connects every communicator's algorithms at init. In 0.9.2 (model_
// executor/layers/logits_processor.py:88-96; base_device_communicator.py:
// 115-139), 0.11.0 and 0.14.1 the dummy sampler run gathers the logits with torch's own TP
// process group (model_executor/layers/logits_processor.py:71-80 and
// 76-85; distributed/device_communicators/base_device_communicator.py:
// 129-143 and 139-153: dist.all_gather_into_tensor, which the CUDA
// communicator does not override), whose NCCL communicator torch creates
// then: nccl.go's rule for a TP communicator that has run collectives.
// 0.33.0 gathers through the PyNcclCommunicator (cuda_communicator.py:
// 460-480), so the profile creates none.
//
// NCCL's rule is for NVSwitch parts (nccl.go); elsewhere nothing is
// counted (the training side's measured default is a training
// communicator's), with a note.

// customAllReduceBytes is SGLang's CustomAllreduce's device memory (0.5.3
// srt/distributed/device_communicators/custom_all_reduce.py:60, 176-188;
// 0.5.23 l.42, 106-117): two IPC buffers cudaMalloc'd, meta_size() +
// max_size (8 MiB) and max_size, each taking whole 2 MiB pages, and the
// 8 MiB rank_data table, torch.empty, which PyTorch's allocator serves
// from a new kLargeBuffer segment (allocator.go segmentSize). It runs on
// 2, 4, 6 or 8 GPUs, more than two only joined by NVLink (0.5.3
// l.59, 110, 148); counted here on NVSwitch parts.
func customAllReduceBytes(tp int, g GPU) Bytes {
	ipc := customAllReduceIPC(tp, g)
	if ipc == 0 {
		return 0
	}
	return ipc + segmentSize(8*MiB)
}

// customAllReduceIPC is the custom all-reduce's two cudaMalloc'd IPC
// buffers alone, outside PyTorch's allocator (vLLM 0.9.2 distributed/
// device_communicators/custom_all_reduce.py:57, 157-162, whose rank_data,
// l.168, is torch.empty: PyTorch's memory).
func customAllReduceIPC(tp int, g GPU) Bytes {
	switch tp {
	case 2, 4, 6, 8:
	default:
		return 0
	}
	if !g.NVSwitch {
		return 0
	}
	const maxSize = 8 * MiB
	meta := maxSize + 2*MiB // the Signal struct, a few KiB, takes a page of its own
	return meta + maxSize
}

// servingNCCLRelease is NCCL release ver as an engine runs it: with
// NCCL_CUMEM_ENABLE=0 (cuMem false) no cuMem granules and no runtime
// connection (init.cc:1148 at v2.27.3-1: runtimeConn = cuMemSupport &&
// NCCL_RUNTIME_CONNECT).
func servingNCCLRelease(ver string, cuMem bool) (ncclRelease, Modelled, error) {
	rel, m, err := ncclReleaseOf(ver)
	if err != nil {
		return rel, m, err
	}
	if !cuMem {
		rel.cuMem, rel.lazy = false, false
	}
	return rel, m, nil
}

// tpComm is a serving engine's TP communicator: tp ranks, in one node up
// to nodeGPUs.
func tpComm(tp int, t ncclTraffic, noNVLS bool) ncclComm {
	return ncclComm{group: "tp", ranks: tp, local: min(tp, nodeGPUs), traffic: t, noNVLS: noNVLS}
}

// sglangNCCL is what SGLang's TP rank holds before it measures the free
// memory that sizes its pool: NCCL's warmed-up TP communicator and the
// custom all-reduce, and a note; zeros at tp 1.
func sglangNCCL(tp int, g GPU, rel sglangRelease) (nccl, car Bytes, note string, err error) {
	if tp <= 1 {
		return 0, 0, "", nil
	}
	if !g.NVSwitch {
		return 0, 0, fmt.Sprintf("NCCL: not counted on %s (no NCCL rule for a part without NVSwitch; nccl.go)", g.Name), nil
	}
	nrel, m, err := servingNCCLRelease(rel.nccl, false)
	if err != nil {
		return 0, 0, "", err
	}
	c := tpComm(tp, ncclWarmUp, true)
	nccl, car = ncclCommBytes(c, g, nrel), customAllReduceBytes(tp, g)
	note = fmt.Sprintf("NCCL %s (torch's pin) on %s: the TP communicator (%d ranks) %v, connected at init (SGLang sets NCCL_CUMEM_ENABLE=0 and NCCL_NVLS_ENABLE=0), and the custom all-reduce's buffers %v, taken before SGLang measures the free memory (serving_nccl.go)",
		m.Release, g.Name, tp, nccl, car)
	return nccl, car, note, nil
}

// vllmNCCL is the NCCL memory vLLM's profile adds on a TP rank (its
// non-torch increase), and a note; zero at tp 1 and where the release's
// profile creates no communicator.
func vllmNCCL(tp int, g GPU, rel vllmRelease) (Bytes, string, error) {
	if tp <= 1 || !rel.profileTorchComm {
		return 0, "", nil
	}
	if !g.NVSwitch {
		return 0, fmt.Sprintf("NCCL: not counted on %s (no NCCL rule for a part without NVSwitch; nccl.go)", g.Name), nil
	}
	nrel, m, err := servingNCCLRelease(rel.nccl, !rel.ncclCuMemOff)
	if err != nil {
		return 0, "", err
	}
	b := ncclCommBytes(tpComm(tp, ncclCollectives, false), g, nrel)
	if !rel.groupsInProfile {
		note := fmt.Sprintf("NCCL %s (torch's pin) on %s: the profile's logits all-gather creates torch's TP communicator (%d ranks), %v of non-torch memory (ring and NVLS buffers: NCCL connects the one its tuner picks, the rule counts both); the PyNcclCommunicator and custom all-reduce, set up before the init snapshot, are outside the budget (serving_nccl.go)",
			m.Release, g.Name, tp, b)
		return b, note, nil
	}
	py, car := ncclCommBytes(tpComm(tp, ncclWarmUp, false), g, nrel), customAllReduceIPC(tp, g)
	note := fmt.Sprintf("NCCL %s (torch's pin) on %s: vLLM %s takes its init snapshot before the parallel groups and sets NCCL_CUMEM_ENABLE=0, so its non-torch memory holds the PyNcclCommunicator (%d ranks) %v and torch's TP communicator, which the profile's logits all-gather creates, %v, each connected at init (ring, tree, NVLS and the p2p pool), and the custom all-reduce's IPC buffers %v (serving_nccl.go)",
		m.Release, g.Name, rel.Version, tp, py, b, car)
	return py + b + car, note, nil
}
