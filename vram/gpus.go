package vram

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// archMetal is the Arch of Apple silicon entries: Metal, no CUDA.
const archMetal = "Metal"

// servesOn refuses a serving engine that does not run on g: vLLM, SGLang
// and TGI run on CUDA and ROCm GPUs, not on Apple silicon (llama.cpp and
// Ollama run there, on Metal).
func servesOn(engine string, g GPU) error {
	if g.Arch == archMetal {
		return fmt.Errorf("gpu %q: %s runs on CUDA and ROCm GPUs, not on Apple silicon (Metal); plan a Mac with llama_cpp or ollama", g.Name, engine)
	}
	return nil
}

// platform is the software stack PyTorch drives a part with.
type platform uint8

const (
	platformCUDA  platform = iota
	platformROCm           // AMD Instinct (CDNA) and Radeon (RDNA) parts
	platformMetal          // Apple silicon
	platformOther          // Gaudi's HPU
)

// platform says g's stack from its architecture.
func (g GPU) platform() platform {
	switch {
	case g.Arch == archMetal:
		return platformMetal
	case strings.HasPrefix(g.Arch, "CDNA"), strings.HasPrefix(g.Arch, "RDNA"):
		return platformROCm
	case strings.HasPrefix(g.Arch, "Gaudi"):
		return platformOther
	}
	return platformCUDA
}

// mi300Class reports an AMD Instinct part of the MI300 line and after
// (gfx942: MI300X, MI325X; gfx950: MI355X), for which ROCm's libraries
// size some buffers apart.
func (g GPU) mi300Class() bool { return g.Arch == "CDNA3" || g.Arch == "CDNA4" }

// GPU is a catalog entry for planning without the hardware.
//
// Memory is the device total as the driver reports it (nvidia-smi / NVML
// "total"), which for NVIDIA data-center parts is the marketing figure read
// as GiB, minus what the driver keeps for ECC and firmware on some parts.
// Vendor "GB" for memory sizes are binary (an "80GB" A100 has 81920 MiB);
// where the reported total differs from the marketing figure the comment says
// which one is used.
type GPU struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	Memory  Bytes    `json:"memory"`
	// CUDATotal is the total CUDA reports (cudaMemGetInfo, PyTorch's
	// total_memory and its out-of-memory "total capacity"): NVML's total
	// less what the driver reserves, 0.4–0.9 GiB on 24–80 GB parts. It is
	// what a process can allocate and what vLLM's gpu_memory_utilization
	// and SGLang's mem_fraction_static multiply; zero where no Linux
	// measurement was found (Total then falls back to Memory).
	CUDATotal Bytes  `json:"cuda_total,omitempty"`
	Arch      string `json:"arch"`
	// ComputeCapability is major*10+minor (90 for Hopper).
	ComputeCapability int `json:"compute_capability"`
	// Context is the default CUDA context plus module images a PyTorch
	// process holds before its first tensor, with lazy module loading
	// (CUDA ≥ 11.7, PyTorch ≥ 1.13): measured values are 256–430 MiB and
	// grow with the SM count (anchors: pytorch PR #86509, #107667; see
	// DeviceOverhead). Override it with a measurement of your machine.
	Context Bytes `json:"context"`
	// TFLOPS is the dense 16-bit (BF16, or FP16 where the part has no
	// BF16) tensor-core peak from the datasheet, without structured
	// sparsity; Bandwidth the memory bandwidth in bytes per second. Zero
	// when unknown (a bare capacity). Throughput bounds use them.
	TFLOPS float64 `json:"tflops,omitempty"`
	// FP32TFLOPS is the plain FP32 peak: PyTorch runs float32 matmuls
	// there, not on TF32 tensor cores, unless asked
	// (torch.backends.cuda.matmul.allow_tf32 is False since PyTorch 1.12).
	FP32TFLOPS float64 `json:"fp32_tflops,omitempty"`
	Bandwidth  float64 `json:"bandwidth,omitempty"`
	Source     string  `json:"source"`
	// CapacityOnly marks entries (non-NVIDIA) that only give a capacity.
	CapacityOnly bool `json:"capacity_only,omitempty"`
	// Unified: the GPU's memory is the machine's, shared with the CPU
	// (DGX Spark's GB10: CUDA reports the whole pool and nvidia-smi no
	// total; an Apple silicon Mac; AMD's Strix Halo). What the operating
	// system, the Python process's host memory and other programs hold
	// comes off the same pool, so a verdict against it says so. A GH200
	// is not unified: its Grace CPU's LPDDR5X is host memory behind
	// NVLink-C2C, and the HBM it plans against is the GPU's own.
	Unified bool `json:"unified,omitempty"`
	// UnifiedReserve is what the operating system and other processes
	// keep of a unified pool, as measured on the part; the verdict leaves
	// it out of the plan's limit. On an Apple silicon Mac, whose Memory is
	// the RAM, it is the RAM less Metal's recommendedMaxWorkingSetSize,
	// so that the limit is Metal's cap.
	UnifiedReserve Bytes `json:"unified_reserve,omitempty"`
	// NVSwitch: the part comes in NVSwitch-connected nodes (HGX/DGX, NVL
	// racks), whose NCCL channel counts and NVLink SHARP buffers the
	// engine counts (nccl.go); other parts keep a measured default per
	// process group.
	NVSwitch bool `json:"nvswitch,omitempty"`
	// NVLink is a GPU's NVLink bandwidth in one direction, GB/s (half the
	// datasheet's bidirectional figure); 0 where the catalog has none.
	NVLink float64 `json:"nvlink,omitempty"`
}

// Total is the device memory as CUDA reports it: CUDATotal, else Memory
// (and Memory where a plan set it lower: a MIG slice, a share).
func (g GPU) Total() Bytes {
	if g.CUDATotal > 0 && g.CUDATotal < g.Memory {
		return g.CUDATotal
	}
	return g.Memory
}

// Usable is the memory left for the process's tensors after the context.
func (g GPU) Usable() Bytes { return g.Total() - g.Context }

// FreeAtStart is what a process finds free once its context is made: the
// usable memory less what the operating system and other processes keep of
// a unified pool (on an Apple silicon Mac, Metal's working-set cap, which
// ggml-metal reports as the device's memory).
func (g GPU) FreeAtStart() Bytes { return g.Usable() - g.UnifiedReserve }

// peaksNotFound marks a catalog Source whose part has no peaks from a
// cited source: its TFLOPS and Bandwidth stay zero and throughput bounds
// refuse it rather than guess.
const peaksNotFound = "peaks: not found"

// gpus is the catalog. Sources are vendor datasheets; the reported totals
// (MiB) come from nvidia-smi outputs of those parts (rocm-smi's and
// PyTorch's for AMD; for an Apple silicon Mac the RAM, and Metal's
// recommendedMaxWorkingSetSize as its limit).
var gpus = []GPU{
	{Name: "V100-16GB", Aliases: []string{"Tesla V100-SXM2-16GB", "V100 16GB", "V100"}, Memory: 16160 * MiB, CUDATotal: 16160 * MiB, Arch: "Volta", ComputeCapability: 70, Context: 420 * MiB, TFLOPS: 125, FP32TFLOPS: 15.7, Bandwidth: 900e9, Source: "NVIDIA V100 datasheet (16 GB HBM2); nvidia-smi total 16160MiB; peaks (dense): V100 SXM2: 125 TFLOPS tensor, FP32 15.7 TFLOPS, 900 GB/s; CUDA total: googlecolab/colabtools#2001 (15.78 GiB total capacity)"},
	{Name: "V100-32GB", Aliases: []string{"Tesla V100-SXM2-32GB", "V100 32GB"}, Memory: 32510 * MiB, CUDATotal: 32501 * MiB, Arch: "Volta", ComputeCapability: 70, Context: 420 * MiB, TFLOPS: 125, FP32TFLOPS: 15.7, Bandwidth: 900e9, Source: "NVIDIA V100 datasheet (32 GB HBM2); nvidia-smi total 32510MiB; peaks (dense): V100 SXM2: 125 TFLOPS tensor, FP32 15.7 TFLOPS, 900 GB/s; CUDA total: liucongg/ChatGLM-Finetuning#73, haotian-liu/LLaVA#812 (31.74 GiB)"},
	{Name: "T4", Aliases: []string{"Tesla T4"}, Memory: 15360 * MiB, CUDATotal: 14909 * MiB, Arch: "Turing", ComputeCapability: 75, Context: 300 * MiB, TFLOPS: 65, FP32TFLOPS: 8.1, Bandwidth: 320e9, Source: "NVIDIA T4 datasheet (16 GB GDDR6); nvidia-smi total 15360MiB; peaks (dense): T4: 65 TFLOPS mixed precision, FP32 8.1 TFLOPS, 320 GB/s; CUDA total: googlecolab/colabtools#3439, hpcaitech/Open-Sora#697 (14.56 GiB on 2025 drivers; 14.75 on older)"},
	{Name: "A10", Aliases: []string{"NVIDIA A10", "A10 24GB"}, Memory: 23028 * MiB, CUDATotal: 22600 * MiB, Arch: "Ampere", ComputeCapability: 86, Context: 350 * MiB, TFLOPS: 125, FP32TFLOPS: 31.2, Bandwidth: 600e9, Source: "NVIDIA A10 datasheet (24 GB GDDR6); nvidia-smi total 23028MiB; peaks (dense): A10: 125 TFLOPS BF16, FP32 31.2 TFLOPS, 600 GB/s; CUDA total: zai-org/CogVLM#236 (22.07 GiB with CUDA 12; 21.99 with CUDA 11.8)"},
	{Name: "A100-40GB", Aliases: []string{"A100-SXM4-40GB", "A100 40GB", "A100-PCIE-40GB"}, Memory: 40960 * MiB, CUDATotal: 40325 * MiB, Arch: "Ampere", ComputeCapability: 80, Context: 420 * MiB, TFLOPS: 312, FP32TFLOPS: 19.5, Bandwidth: 1555e9, Source: "NVIDIA A100 datasheet (40 GB HBM2); nvidia-smi total 40960MiB; peaks (dense): A100 40GB SXM: 312 TFLOPS BF16, FP32 19.5 TFLOPS, 1555 GB/s; CUDA total: bottlerocket-os/bottlerocket#3873, Wan-Video/Wan2.2#87 (39.38 GiB)"},
	{Name: "A100-80GB", Aliases: []string{"A100-SXM4-80GB", "A100 80GB", "A100-PCIE-80GB", "A100"}, Memory: 81920 * MiB, CUDATotal: 81050 * MiB, Arch: "Ampere", ComputeCapability: 80, Context: 420 * MiB, TFLOPS: 312, FP32TFLOPS: 19.5, Bandwidth: 2039e9, Source: "NVIDIA A100 datasheet (80 GB HBM2e); nvidia-smi total 81920MiB; peaks (dense): A100 80GB SXM: 312 TFLOPS BF16, FP32 19.5 TFLOPS, 2039 GB/s; CUDA total: vllm-project/vllm#4408, lianqi1008/Control-GIC#6 (79.15 GiB; 79.14–79.33 seen)"},
	{Name: "L4", Aliases: []string{"NVIDIA L4"}, Memory: 23034 * MiB, CUDATotal: 22518 * MiB, Arch: "Ada", ComputeCapability: 89, Context: 300 * MiB, TFLOPS: 121, FP32TFLOPS: 30.3, Bandwidth: 300e9, Source: "NVIDIA L4 datasheet (24 GB GDDR6); nvidia-smi total 23034MiB; peaks (dense): L4: 121 TFLOPS BF16 (242 with sparsity), FP32 30.3 TFLOPS, 300 GB/s; CUDA total: a deviceQuery dump, CUDA 11.8 (21.99 GiB)"},
	{Name: "L40S", Aliases: []string{"NVIDIA L40S"}, Memory: 46068 * MiB, CUDATotal: 45588 * MiB, Arch: "Ada", ComputeCapability: 89, Context: 400 * MiB, TFLOPS: 362, FP32TFLOPS: 91.6, Bandwidth: 864e9, Source: "NVIDIA L40S datasheet (48 GB GDDR6); nvidia-smi total 46068MiB; peaks (dense): L40S: 362 TFLOPS BF16 (733 with sparsity), FP32 91.6 TFLOPS, 864 GB/s; CUDA total: Wan-Video/Wan2.1#205, vladmandic/sdnext#3656 (44.52 GiB)"},
	{Name: "H100-80GB", Aliases: []string{"H100 SXM", "H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", "H100 80GB", "H100"}, Memory: 81559 * MiB, CUDATotal: 81091 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 989, FP32TFLOPS: 67, Bandwidth: 3350e9, NVSwitch: true, NVLink: 450, Source: "NVIDIA H100 datasheet (80 GB HBM3); nvidia-smi total 81559MiB; peaks (dense): H100 SXM: 989 TFLOPS BF16 (1979 with sparsity), FP32 67 TFLOPS, 3.35 TB/s; CUDA total: vllm-project/vllm#12126 (79.19 GiB; 79.18–79.22 across drivers); NVSwitch: HGX H100 8-GPU (four NVSwitch chips), 900 GB/s NVLink (H100 SXM datasheet) a GPU, 450 GB/s a direction"},
	{Name: "H100-PCIe", Aliases: []string{"H100 PCIe", "NVIDIA H100 PCIe"}, Memory: 81559 * MiB, CUDATotal: 81009 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 756, FP32TFLOPS: 51, Bandwidth: 2000e9, Source: "NVIDIA H100 datasheet (80 GB HBM2e); nvidia-smi total 81559MiB; peaks (dense): H100 PCIe: 756 TFLOPS BF16 (1513 with sparsity), FP32 51 TFLOPS, 2 TB/s; CUDA total: a PyTorch device-property dump (79.11 GiB)"},
	{Name: "H100-NVL", Aliases: []string{"H100 NVL", "H100 94GB"}, Memory: 95830 * MiB, CUDATotal: 95232 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 835, FP32TFLOPS: 60, Bandwidth: 3900e9, Source: "NVIDIA H100 NVL datasheet (94 GB HBM3); nvidia-smi total 95830MiB; peaks (dense): H100 NVL: 835 TFLOPS BF16 per GPU (1671 with sparsity), FP32 60 TFLOPS, 3.9 TB/s; CUDA total: ali-vilab/VACE#56 (93.00 GiB)"},
	{Name: "H200", Aliases: []string{"NVIDIA H200", "H200 141GB", "H200-SXM5-141GB", "NVIDIA H200 141GB HBM3e"}, Memory: 143771 * MiB, CUDATotal: 143155 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 520 * MiB, TFLOPS: 989, FP32TFLOPS: 67, Bandwidth: 4800e9, NVSwitch: true, NVLink: 450, Source: "NVIDIA H200 datasheet (141 GB HBM3e); nvidia-smi total 143771MiB; peaks (dense): H200 SXM: 989 TFLOPS BF16 (1979 with sparsity), FP32 67 TFLOPS, 4.8 TB/s; CUDA total: stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md (139.80 GiB); NVSwitch: HGX H200 8-GPU (NVSwitch), 900 GB/s NVLink (H200 SXM datasheet) a GPU, 450 GB/s a direction"},
	{Name: "H200-NVL", Aliases: []string{"NVIDIA H200 NVL", "H200 NVL", "H200 NVL 141GB"}, Memory: 143771 * MiB, CUDATotal: 150109880320, Arch: "Hopper", ComputeCapability: 90, Context: 520 * MiB, Source: "NVIDIA H200 NVL (141 GB HBM3e, a PCIe card); nvidia-smi total 143771MiB, device name, compute capability 9.0 and CUDA total 150109880320 B (\"Total VRAM: 139.8 GB (150,109,880,320 bytes)\", PyTorch 2.11; 143155.94 MiB, the H200 SXM's) in one public log, driver 580.173.02 (repository not resolved); peaks: not found in a cited source (left out); context: the H200's (not measured on this part); NVSwitch: not set (no NVSwitch node found for this part)"},
	{Name: "B200", Aliases: []string{"NVIDIA B200", "B200 180GB"}, Memory: 183359 * MiB, CUDATotal: 182630 * MiB, Arch: "Blackwell", ComputeCapability: 100, Context: 560 * MiB, TFLOPS: 2250, FP32TFLOPS: 75, Bandwidth: 8000e9, NVSwitch: true, NVLink: 900, Source: "NVIDIA DGX B200 datasheet (180 GB HBM3e per GPU); nvidia-smi total 183359MiB; peaks (dense): HGX B200: 2.25 PFLOPS BF16 dense per GPU, 8 TB/s; CUDA total: PyTorch device-property dumps (178.35 GiB); NVSwitch: HGX/DGX B200 (two NVSwitch chips), 1.8 TB/s NVLink 5 (DGX B200 datasheet) a GPU, 900 GB/s a direction"},
	{Name: "GB200", Aliases: []string{"NVIDIA GB200"}, Memory: 189471 * MiB, Arch: "Blackwell", ComputeCapability: 100, Context: 560 * MiB, TFLOPS: 2500, FP32TFLOPS: 80, Bandwidth: 8000e9, NVSwitch: true, NVLink: 900, Source: "NVIDIA GB200 NVL72 datasheet (186 GB HBM3e per GPU); nvidia-smi total 189471MiB; peaks (dense): GB200 NVL72: 180 PFLOPS BF16 dense over 72 GPUs, 8 TB/s per GPU; NVSwitch: GB200 NVL72 (NVLink Switch trays), 1.8 TB/s NVLink 5 (GB200 NVL72 datasheet) a GPU, 900 GB/s a direction"},
	{Name: "B300", Aliases: []string{"NVIDIA B300 SXM6 AC", "B300 SXM6 AC", "HGX B300", "B300 288GB"}, Memory: 275040 * MiB, CUDATotal: 274124 * MiB, Arch: "Blackwell Ultra", ComputeCapability: 103, Context: 560 * MiB, TFLOPS: 2250, FP32TFLOPS: 80, Bandwidth: 8000e9, NVSwitch: true, NVLink: 900, Source: "NVIDIA DGX B300 datasheet (288 GB HBM3e per GPU); nvidia-smi total 275040MiB: ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/b300_sxm.yaml (mem_capacity, \"275040MiB reported by nvidia-smi\"); device name and compute capability 10.3: kokkos/kokkos#8791, NVIDIA/cosmos-framework#114; peaks (dense): 2.25 PFLOPS BF16, FP32 80 TFLOPS, 8 TB/s (stas00/ml-engineering compute/accelerator/README.md, from the DGX B300 datasheet); CUDA total: sgl-project/sglang#25225 (torch.cuda.mem_get_info 267.7 GiB); context: B200's (not measured on this part); NVSwitch: HGX B300 (NVSwitch), 1.8 TB/s NVLink 5 (HGX B300) a GPU, 900 GB/s a direction"},
	{Name: "GB300", Aliases: []string{"NVIDIA GB300"}, Memory: 284208 * MiB, Arch: "Blackwell Ultra", ComputeCapability: 103, Context: 560 * MiB, TFLOPS: 2500, FP32TFLOPS: 80, Bandwidth: 8000e9, NVSwitch: true, NVLink: 900, Source: "NVIDIA GB300 NVL72 (288 GB HBM3e per GPU); nvidia-smi total 284208MiB (reserved 947MiB): NVIDIA/k8s-test-infra tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-gb300.xml, a real nvidia-smi -q -x capture, driver 580.173.02; compute capability 10.3: ai-dynamo/aiconfigurator gb300.yaml (sm_version 103); peaks (dense): 2.5 PFLOPS BF16, FP32 80 TFLOPS (stas00/ml-engineering, from the GB300 NVL72 spec), 8 TB/s (aiconfigurator gb300.yaml); no CUDA total found (falls back to nvidia-smi's); context: B200's (not measured on this part); NVSwitch: GB300 NVL72 (NVLink Switch trays), 1.8 TB/s NVLink 5 (GB300 NVL72) a GPU, 900 GB/s a direction"},
	{Name: "H20", Aliases: []string{"NVIDIA H20", "H20 96GB"}, Memory: 97871 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 148, Bandwidth: 4000e9, NVSwitch: true, NVLink: 450, Source: "NVIDIA H20 (96 GB HBM3); nvidia-smi total 97871MiB: NVIDIA/nvtrust#128 (driver 580.95.05); peaks (dense): 148 TFLOPS FP16/BF16, 4.0 TB/s (ai-dynamo/aiconfigurator src/aiconfigurator/systems/h20_sxm.yaml); no CUDA total found; context: H100's (not measured on this part); NVSwitch: HGX H20 (NVSwitch), 900 GB/s NVLink (HGX H20) a GPU, 450 GB/s a direction"},
	{Name: "H20-3e", Aliases: []string{"NVIDIA H20-3e", "H20 141GB"}, Memory: 143771 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 148, Bandwidth: 4800e9, NVSwitch: true, NVLink: 450, Source: "NVIDIA H20 (141 GB HBM3e; the driver names it H20-3e: NVIDIA/nvbandwidth#48); nvidia-smi total 143771MiB: ai-dynamo/aiconfigurator h20_3e.yaml (mem_capacity 150754820096, \"143771 MiB\"); peaks (dense): 148 TFLOPS BF16, 4.8 TB/s (tile-ai/TileOPs#1658); no CUDA total found; context: H100's (not measured on this part); NVSwitch: HGX H20 (NVSwitch), 900 GB/s NVLink (HGX H20) a GPU, 450 GB/s a direction"},
	{Name: "GH200", Aliases: []string{"NVIDIA GH200 480GB", "GH200 480GB", "GH200 96GB", "GH200-96GB"}, Memory: 97871 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 989, FP32TFLOPS: 67, Bandwidth: 4000e9, Source: "NVIDIA GH200 Grace Hopper Superchip, 96 GB HBM3 (the driver names it \"NVIDIA GH200 480GB\", after the Grace CPU's 480 GB LPDDR5X); nvidia-smi total 97871MiB in many public logs, 700 W and 900 W caps (repositories not resolved); the total and the verdict are the HBM's: the Grace CPU's LPDDR5X is host memory behind the NVLink-C2C link, which nvidia-smi does not count, so the part is not marked unified; compute capability 9.0, 132 SMs (OpenCL's compute units, mredenti/PowerCapping configuration/OpenCL_benchmark.md, driver 555.42.06, which also gives 97280 MB of OpenCL global memory: not used as the CUDA total); no CUDA total found; peaks (dense): 989 TFLOPS BF16, FP32 67 TFLOPS, 4.0 TB/s (stas00/ml-engineering compute/accelerator/README.md and its memory table, GH200 96 GB); context: H100's (not measured on this part)"},
	{Name: "GH200-144GB", Aliases: []string{"NVIDIA GH200 144G HBM3e", "GH200 144G HBM3e", "GH200 144GB", "GH200 141GB"}, Memory: 146831 * MiB, Arch: "Hopper", ComputeCapability: 90, Context: 500 * MiB, TFLOPS: 989, FP32TFLOPS: 67, Bandwidth: 4800e9, Source: "NVIDIA GH200 Grace Hopper Superchip, 144 GB HBM3e (\"NVIDIA GH200 144G HBM3e\", device 0x2348: NVIDIA/mig-parted#139); nvidia-smi total 146831MiB and compute capability 9.0 in one public --query-gpu log, driver 580.173.02 (repository not resolved); the total and the verdict are the HBM's: the Grace CPU's LPDDR5X is host memory behind the NVLink-C2C link, not counted, so the part is not marked unified; no CUDA total measured (a fake-device test asserts total_memory 153008209920 B, 142.5 GiB: not a measurement, not used); peaks (dense): 989 TFLOPS BF16, FP32 67 TFLOPS (as the 96 GB GH200), 4.8 TB/s (stas00/ml-engineering memory table, GH200 141 GB HBM3e); context: H100's (not measured on this part)"},
	{Name: "RTX-PRO-6000", Aliases: []string{"NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", "RTX PRO 6000"}, Memory: 97887 * MiB, CUDATotal: 97247 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 555 * MiB, FP32TFLOPS: 125, Bandwidth: 1792e9, Source: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (96 GB GDDR7 ECC; FP32 125 TFLOPS, 1792 GB/s; no published dense BF16 peak; peaks: FP32 125 TFLOPS, 1792 GB/s); nvidia-smi (NVML) total 97887MiB, CUDA total 97247MiB and context 555MiB (\"cudaMemGetInfo permanently eats\"): ggml-org/llama.cpp#23604; CUDA total also ggml-org/llama.cpp#22616 (97249 MiB); 188 SMs: NVIDIA/cudnn-frontend#1164"},
	{Name: "RTX-PRO-6000-Server", Aliases: []string{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Server"}, Memory: 97887 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 555 * MiB, Bandwidth: 1792e9, Source: "NVIDIA RTX PRO 6000 Blackwell Server Edition (96 GB GDDR7); nvidia-smi total 97887MiB and compute capability 12.0: ai-dynamo/aiconfigurator rtx_pro_6000_server.yaml (\"97887 MiB reported by nvidia-smi\"); peaks: 1.792 TB/s, no published dense BF16 peak; no CUDA total found; context: the Workstation Edition's (ggml-org/llama.cpp#23604)"},
	{Name: "RTX-PRO-6000-Max-Q", Aliases: []string{"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000 Blackwell Max-Q", "RTX PRO 6000 Max-Q"}, Memory: 97887 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 555 * MiB, Source: "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition (96 GB GDDR7); nvidia-smi total 97887MiB in public logs (repositories not resolved); compute capability 12.0, 188 SMs (a public profiling note, repository not resolved); peaks: not found in a datasheet (left out); no CUDA total found; context: the Workstation Edition's (ggml-org/llama.cpp#23604)"},
	{Name: "DGX-Spark", Aliases: []string{"NVIDIA GB10", "GB10", "DGX Spark"}, Memory: 124610 * MiB, CUDATotal: 124610 * MiB, Arch: "Blackwell", ComputeCapability: 121, Context: 350 * MiB, Bandwidth: 273e9, Unified: true, UnifiedReserve: 11591 * MiB, Source: "NVIDIA DGX Spark (GB10, 128 GB LPDDR5X unified with the CPU, 273 GB/s); nvidia-smi reports no memory total (\"Not Supported\": snowflakedb/ArcticTraining#345); CUDA total 121.69 GiB, the pool the CPU shares: unslothai/unsloth#10283, vLLM's \"Free memory on device (110.37/121.69 GiB)\" in MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47; compute capability 12.1; peaks: 273 GB/s, no published dense BF16 peak (NVIDIA publishes FP4 sparse only); context: the RTX 5090's (not measured on this part); what the OS and other processes keep comes off the same pool: 121.69 − 110.37 = 11.32 GiB not free at vLLM's start in that log (the unified reserve)"},
	{Name: "RTX-3090", Aliases: []string{"RTX 3090", "GeForce RTX 3090"}, Memory: 24576 * MiB, CUDATotal: 24259 * MiB, Arch: "Ampere", ComputeCapability: 86, Context: 256 * MiB, TFLOPS: 71, FP32TFLOPS: 35.6, Bandwidth: 936e9, Source: "NVIDIA RTX 3090 specifications (24 GB GDDR6X); context: InvokeAI #9413; peaks (dense): GA102 whitepaper: RTX 3090 FP16/BF16 tensor with FP32 accumulate 71 TFLOPS, FP32 35.6 TFLOPS, 936 GB/s; CUDA total: yandex/YaLM-100B#9, Ixiaohuihuihui/GCC-Net#14 (23.69 GiB)"},
	{Name: "RTX-3090-Ti", Aliases: []string{"RTX 3090 Ti", "GeForce RTX 3090 Ti"}, Memory: 24564 * MiB, CUDATotal: 24115 * MiB, Arch: "Ampere", ComputeCapability: 86, Context: 256 * MiB, TFLOPS: 80, FP32TFLOPS: 40, Bandwidth: 1008e9, Source: "NVIDIA RTX 3090 Ti specifications (24 GB GDDR6X); nvidia-smi total 24564MiB; context as the RTX 3090 (same GA102); peaks (dense): RTX 3090 Ti FP16/BF16 tensor with FP32 accumulate 80 TFLOPS, FP32 40 TFLOPS, 1008 GB/s; CUDA total: a PyTorch device-property dump, driver 590.44.01 (23.55 GiB)"},
	{Name: "RTX-4060", Aliases: []string{"RTX 4060", "GeForce RTX 4060", "RTX 4060 8GB"}, Memory: 8188 * MiB, Arch: "Ada", ComputeCapability: 89, Context: 256 * MiB, TFLOPS: 30.2, FP32TFLOPS: 15.1, Bandwidth: 272e9, Source: "NVIDIA RTX 4060 specifications (8 GB GDDR6); nvidia-smi total 8188MiB; context: the catalog's smallest measured (24 SMs); peaks (dense): RTX 4060 FP16/BF16 tensor with FP32 accumulate 30.2 TFLOPS (242 AI TOPS is FP8 with sparsity), FP32 15.1 TFLOPS, 272 GB/s"},
	{Name: "RTX-4090", Aliases: []string{"RTX 4090", "GeForce RTX 4090", "RTX 4090 24GB"}, Memory: 24564 * MiB, CUDATotal: 24207 * MiB, Arch: "Ada", ComputeCapability: 89, Context: 300 * MiB, TFLOPS: 165.2, FP32TFLOPS: 82.6, Bandwidth: 1008e9, Source: "NVIDIA RTX 4090 specifications (24 GB GDDR6X); nvidia-smi total 24564MiB; peaks (dense): Ada whitepaper: RTX 4090 FP16/BF16 tensor with FP32 accumulate 165.2 TFLOPS, FP32 82.6 TFLOPS, 1008 GB/s; CUDA total: zai-org/CogVideo#36, TMElyralab/MuseTalk#76 (23.61–23.68 GiB)"},
	{Name: "RTX-4090-Laptop", Aliases: []string{"RTX 4090 Laptop GPU", "GeForce RTX 4090 Laptop GPU", "RTX 4090 Laptop"}, Memory: 16376 * MiB, Arch: "Ada", ComputeCapability: 89, Context: 300 * MiB, Source: "NVIDIA GeForce RTX 4090 Laptop GPU (16 GB GDDR6); nvidia-smi total 16376MiB in public logs, Linux driver 615.71.09 and Windows 616.56 (repositories not resolved); compute capability 8.9, 76 SMs (a public log, repository not resolved); no CUDA total found; peaks: not found in a datasheet (left out); context: the RTX 4090's (not measured on this part)"},
	{Name: "RTX-5090", Aliases: []string{"RTX 5090", "GeForce RTX 5090"}, Memory: 32607 * MiB, CUDATotal: 32113 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 350 * MiB, TFLOPS: 209.5, FP32TFLOPS: 104.8, Bandwidth: 1792e9, Source: "NVIDIA RTX 5090 specifications (32 GB GDDR7); nvidia-smi total 32607MiB; peaks (dense): Blackwell RTX whitepaper: RTX 5090 FP16/BF16 tensor with FP32 accumulate 209.5 TFLOPS, FP32 104.8 TFLOPS, 1792 GB/s; CUDA total: Wan-Video/Wan2.1#465 (31.36 GiB)"},
	{Name: "RTX-5090-Laptop", Aliases: []string{"RTX 5090 Laptop GPU", "GeForce RTX 5090 Laptop GPU", "RTX 5090 Laptop"}, Memory: 24463 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 350 * MiB, Source: "NVIDIA GeForce RTX 5090 Laptop GPU (24 GB GDDR7; device id 2c58: akash-network/provider-configs#89); nvidia-smi total 24463MiB and compute capability 12.0 in public logs, drivers 595.91.07 and 610.74 (repositories not resolved); no CUDA total found (llama.cpp's VRAM field reads 24462 MiB on one Linux build, likely NVML's total, and 24435 MiB on Windows: not used); peaks: not found (left out); context: the RTX 5090's (not measured on this part)"},
	{Name: "RTX-5080", Aliases: []string{"RTX 5080", "GeForce RTX 5080", "RTX 5080 16GB"}, Memory: 16303 * MiB, CUDATotal: 15880 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 350 * MiB, Source: "NVIDIA GeForce RTX 5080 (16 GB GDDR7); nvidia-smi total 16303MiB in public logs, Linux driver 610.43.03 and Windows 591.86 (repositories not resolved); CUDA total 15880 MiB: llama.cpp's \"VRAM: 15880 MiB\" (below NVML's total, so cudaDeviceProp.totalGlobalMem), compute capability 12.0, 84 SMs, in one public log (repository not resolved); peaks: not found (left out); context: the RTX 5090's (not measured on this part)"},
	{Name: "RTX-5070-Ti", Aliases: []string{"RTX 5070 Ti", "GeForce RTX 5070 Ti", "RTX 5070 Ti 16GB"}, Memory: 16303 * MiB, CUDATotal: 15842 * MiB, Arch: "Blackwell", ComputeCapability: 120, Context: 350 * MiB, Source: "NVIDIA GeForce RTX 5070 Ti (16 GB GDDR7); nvidia-smi total 16303MiB in public logs (one reads 16302; repositories not resolved); CUDA total 15842 MiB: llama.cpp's \"VRAM: 15842 MiB\", compute capability 12.0, in three public logs, one a Linux container (15808 MiB in another; Windows/WDDM torch reports 16302.56 MiB: not used; repositories not resolved); peaks: not found (left out); context: the RTX 5090's (not measured on this part)"},
	{Name: "TITAN-RTX", Aliases: []string{"TITAN RTX", "TITAN RTX 24GB"}, Memory: 24220 * MiB, Arch: "Turing", ComputeCapability: 75, Context: 300 * MiB, TFLOPS: 130, FP32TFLOPS: 16.3, Bandwidth: 672e9, Source: "NVIDIA TITAN RTX specifications (24 GB GDDR6); nvidia-smi total 24220MiB; peaks (dense): TITAN RTX: 130 TFLOPS tensor, FP32 16.3 TFLOPS, 672 GB/s"},
	{Name: "MI300X", Aliases: []string{"AMD MI300X", "Instinct MI300X", "AMD Instinct MI300X"}, Memory: 196592 * MiB, Arch: "CDNA3", Context: 0, TFLOPS: 1307.4, FP32TFLOPS: 163.4, Bandwidth: 5300e9, Source: "AMD Instinct MI300X datasheet (192 GB HBM3); rocm-smi VRAM Total Memory 206141652992 B (ROCm/legacy-rocm-build#4750), torch's total capacity 191.98 GiB; capacity only: the NVML layer does not see AMD GPUs; peaks (dense): MI300X: 1307.4 TFLOPS BF16 dense, 5.3 TB/s", CapacityOnly: true},
	{Name: "MI325X", Aliases: []string{"AMD MI325X", "Instinct MI325X", "AMD Instinct MI325X"}, Memory: 256 * GiB, Arch: "CDNA3", TFLOPS: 1307.4, FP32TFLOPS: 163.4, Bandwidth: 6000e9, Source: "spec only: AMD Instinct MI325X datasheet (256 GB HBM3E); peaks (dense): 1307.4 TFLOPS BF16, FP32 163.4 TFLOPS, 6 TB/s; no rocm-smi or torch total attributed to this part was found; capacity only", CapacityOnly: true},
	{Name: "MI355X", Aliases: []string{"AMD MI355X", "Instinct MI355X", "AMD Instinct MI355X"}, Memory: 288 * GiB, Arch: "CDNA4", TFLOPS: 2500, FP32TFLOPS: 157.3, Bandwidth: 8000e9, Source: "spec only: AMD Instinct MI355X datasheet (288 GB HBM3E); peaks (dense): 2.5 PFLOPS BF16, FP32 157.3 TFLOPS, 8 TB/s, as stas00/ml-engineering tabulates them; no rocm-smi or torch total attributed to this part was found; capacity only", CapacityOnly: true},
	{Name: "Gaudi-3", Aliases: []string{"Intel Gaudi 3", "Gaudi 3", "HL-325L"}, Memory: 128 * GiB, Arch: "Gaudi 3", TFLOPS: 1677, FP32TFLOPS: 229, Bandwidth: 3700e9, Source: "spec only: Intel Gaudi 3 (128 GB HBM2e); peaks (dense): BF16 1677 TFLOPS at the 1600 MHz it runs, FP32 229 TFLOPS, 3.7 TB/s (stas00/ml-engineering compute/accelerator/README.md, note 19); no hl-smi total from a real device was found; capacity only", CapacityOnly: true},
	{Name: "Apple-M-16GB", Aliases: []string{"Apple M1 16GB", "Apple M2 16GB", "Apple M4 16GB", "Mac 16GB", "Apple 16GB", "Apple Silicon 16GB"}, Memory: 16 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 16*GiB - 1092267*MiB/100, CapacityOnly: true, Source: "Apple silicon Mac, 16 GB unified memory; Metal's recommendedMaxWorkingSetSize 10922.67 MiB (10.67 GiB) on an M1 MacBook Pro 16 GB: abetlen/llama-cpp-python#687, a 2023 llama.cpp log that prints MiB labelled \"MB\" (macOS release not stated); newer macOS gives a 16 GB Mac more (\"12.7 GB\" on a Mac mini M4, llama.cpp b9290, 2026; \"12.4GB\" on an M2: rounded figures in public notes, repositories not resolved, not used); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-24GB", Aliases: []string{"Apple M4 Pro 24GB", "Apple M4 24GB", "Apple M2 24GB", "Mac 24GB", "Apple 24GB", "Apple Silicon 24GB"}, Memory: 24 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 24*GiB - 19069665280, CapacityOnly: true, Source: "Apple silicon Mac, 24 GB unified memory (hw.memsize 25769803776); Metal's recommendedMaxWorkingSetSize 19069665280 B (17.76 GiB) on an M4 Pro, macOS 26.2, and the same bytes from mx.device_info on an M2 24 GB and an M4 (public logs, repositories not resolved); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-32GB", Aliases: []string{"Apple M1 Max 32GB", "Apple M2 Max 32GB", "Mac 32GB", "Apple 32GB", "Apple Silicon 32GB"}, Memory: 32 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 32*GiB - 2184534*MiB/100, CapacityOnly: true, Source: "Apple silicon Mac, 32 GB unified memory; Metal's recommendedMaxWorkingSetSize 21845.34 MiB (21.33 GiB) on an M2 Max 32 GB (ollama/ollama#434) and an M1 Max 32 GB (ggml-org/llama.cpp#2011), 2023 llama.cpp logs that print MiB labelled \"MB\" (macOS release not stated); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-36GB", Aliases: []string{"Apple M3 Max 36GB", "Apple M3 Pro 36GB", "Mac 36GB", "Apple 36GB", "Apple Silicon 36GB"}, Memory: 36 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 36*GiB - 30150670000, CapacityOnly: true, Source: "Apple silicon Mac, 36 GB unified memory; Metal's recommendedMaxWorkingSetSize \"30150.67 MB\" (decimal; 28753 MiB as llama.cpp b8981 lists the device) on an M3 Max 36 GB (public llama.cpp logs, repositories not resolved; macOS release not stated); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-64GB", Aliases: []string{"Apple M1 Max 64GB", "Apple M2 Max 64GB", "Apple M2 Ultra 64GB", "Mac 64GB", "Apple 64GB", "Apple Silicon 64GB"}, Memory: 64 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 64*GiB - 48*GiB, CapacityOnly: true, Source: "Apple silicon Mac, 64 GB unified memory; Metal's recommendedMaxWorkingSetSize 48 GiB: \"51539.61 MB\" (decimal) on an \"M2 Mac Pro with 64 GB Memory\" (ggml-org/llama.cpp#9112) and \"49152.00 MB\" (MiB, the 2023 format) on an M1 Max 64 GB (ggml-org/llama.cpp#1870); macOS release not stated; the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-96GB", Aliases: []string{"Apple M2 Max 96GB", "Apple M3 Max 96GB", "Mac 96GB", "Apple 96GB", "Apple Silicon 96GB"}, Memory: 96 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 96*GiB - 72*GiB, CapacityOnly: true, Source: "Apple silicon Mac, 96 GB unified memory; Metal's recommendedMaxWorkingSetSize \"73728,00 MB\" (MiB, the 2023 format: 72 GiB) on an M2 Max 96 GB (ggml-org/llama.cpp#3213; macOS release not stated); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-128GB", Aliases: []string{"Apple M5 Max 128GB", "Apple M4 Max 128GB", "Apple M3 Max 128GB", "Mac 128GB", "Apple 128GB", "Apple Silicon 128GB"}, Memory: 128 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 128*GiB - 115448725504, CapacityOnly: true, Source: "Apple silicon Mac, 128 GB unified memory (hw.memsize 137438953472); Metal's recommendedMaxWorkingSetSize 115448725504 B (107.52 GiB) on an M5 Max 128 GB, macOS 26.x, stock (antirez/ds4#893; \"112.00 GiB with iogpu.wired_limit_mb = 114688\"); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Apple-M-256GB", Aliases: []string{"Apple M3 Ultra 256GB", "Mac 256GB", "Apple 256GB", "Apple Silicon 256GB"}, Memory: 256 * GiB, Arch: archMetal, Unified: true, UnifiedReserve: 256*GiB - 239143780352, CapacityOnly: true, Source: "Apple silicon Mac, 256 GB unified memory (hw.memsize 274877906944); Metal's recommendedMaxWorkingSetSize 239143780352 B (222.72 GiB) on a Mac Studio M3 Ultra 256 GB (a public test fixture of a measured machine, repository not resolved; raullenchai/Rapid-MLX#183 lists \"M3 Ultra 256GB … 239 GB\"; macOS release not stated); the limit is Metal's cap (the unified reserve is the rest of the RAM); the cap is macOS's, by RAM size and macOS release, and sysctl iogpu.wired_limit_mb moves it; no CUDA: no compute capability, no CUDA context counted (Metal's own not measured); peaks: not found (left out); capacity only"},
	{Name: "Strix-Halo-128GB", Aliases: []string{"AMD Ryzen AI Max+ 395 128GB", "Ryzen AI Max+ 395 128GB", "Radeon 8060S 128GB", "AMD Radeon 8060S Graphics 128GB", "Strix Halo 128GB"}, Memory: 63968 * MiB, Arch: "RDNA3.5", Unified: true, CapacityOnly: true, Source: "AMD Ryzen AI Max+ 395 (Strix Halo: Radeon 8060S, gfx1151, 40 CUs: ROCm/legacy-rocm-build#5665), 128 GB LPDDR5X shared with the CPU; the total is what ROCm and PyTorch report as they come, 62.47 GiB, about half the RAM: props.total_memory and mem_get_info's total on a 128 GB Beelink GTR9 Pro, torch 2.13 rocm7.13, BIOS UMA 512 MB (unslothai/unsloth#7960, where amdgpu.gttsize=131072 left that total as it was while mem_get_info's free read 120.00 GiB), ROCm 7.0.2 \"only seeing 62.2GB\" (ROCm/legacy-rocm-build#5595), the amdgpu driver's \"63968M of GTT memory ready\" (antirez/ds4#475; the figure used, 62.47 GiB); it depends on the BIOS UMA and GTT settings, the ROCm release and the backend: 15.5 GiB on other setups (ROCm/legacy-rocm-build#5444, ollama/ollama#13107), HIP's \"total capacity of 128.00 GiB\" on an EVO X2 128 GB (kyuz0/amd-strix-halo-image-video-toolboxes#3, settings not stated), Vulkan's 127488 MiB (llama.cpp): plan a machine that reports another total by that capacity (\"120 GiB\"); no HIP context and no operating-system reserve measured (none counted); peaks: not found in a datasheet (left out; measured 212 GB/s and 36.9 TFLOPS BF16: adiudiuu/tps#1); no CUDA: no compute capability; capacity only"},
}

func (g GPU) clone() GPU {
	g.Aliases = slices.Clone(g.Aliases)
	return g
}

// GPUs lists the catalog names.
func GPUs() []string {
	var out []string
	for _, g := range gpus {
		out = append(out, g.Name)
	}
	sort.Strings(out)
	return out
}

func normGPU(s string) string {
	s = strings.ToLower(s)
	for _, p := range []string{"nvidia ", "tesla ", "geforce "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return gpuNameSeparators.Replace(s)
}

// gpuNameSeparators are what normGPU drops between a name's words (a
// Replacer builds its tables once, on first use).
var gpuNameSeparators = strings.NewReplacer(" ", "", "-", "", "_", "")

// gpuIndex is the catalog by normalized name and alias, built once: a fit
// check looks its device up by name each time.
var gpuIndex = sync.OnceValue(func() map[string]int {
	idx := map[string]int{}
	for i := len(gpus) - 1; i >= 0; i-- { // the first catalog entry a name matches wins
		for _, a := range gpus[i].Aliases {
			idx[normGPU(a)] = i
		}
		idx[normGPU(gpus[i].Name)] = i
	}
	return idx
})

// LookupGPU finds a catalog GPU by name or alias, ignoring case, spaces and
// dashes ("a100 80gb", "NVIDIA H100 80GB HBM3"). The GPU is a copy: changing
// it (its Aliases too) never changes the catalog.
func LookupGPU(name string) (GPU, error) {
	if i, ok := gpuIndex()[normGPU(name)]; ok {
		return gpus[i].clone(), nil
	}
	return GPU{}, fmt.Errorf("unknown GPU %q%s; known: %s; a GPU the catalog lacks is given by its capacity, such as \"80 GiB\" (what nvidia-smi reports as its total)",
		name, didYouMeanSameKind(name, GPUs()), strings.Join(GPUs(), ", "))
}

// ParseCapacity reads a plan's "gpu" field: a catalog GPU, or a capacity
// such as "80 GiB" (treated as a device with no context overhead). Text that
// starts like an amount is read as one, and its error says what is wrong
// with it ("-80 GiB", "0", "NaN GiB"); anything else must be a GPU name.
func ParseCapacity(s string) (GPU, error) {
	g, lerr := LookupGPU(s)
	if lerr == nil {
		return g, nil
	}
	t := strings.ToLower(strings.TrimSpace(s))
	amount := t != "" && (strings.ContainsRune("0123456789+-.", rune(t[0])) ||
		strings.HasPrefix(t, "nan") || strings.HasPrefix(t, "inf"))
	if !amount {
		return GPU{}, lerr
	}
	b, err := ParseBytes(s)
	if err != nil {
		return GPU{}, fmt.Errorf("gpu capacity: %w", err)
	}
	if b <= 0 {
		return GPU{}, fmt.Errorf("gpu capacity %q: must be more than 0 bytes", s)
	}
	return GPU{Name: s, Memory: b}, nil
}
