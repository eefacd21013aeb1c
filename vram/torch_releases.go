package vram

import "slices"

// PyTorch's releases, as far as the engine's figures depend on them: the
// workspaces its GEMM libraries take through the caching allocator on each
// platform (aten/src/ATen/cuda/CublasHandlePool.cpp). Each row is the first
// release of a rule; a release between rows shares the older row's.

// torchRelease is what a PyTorch release sets for the GEMM workspaces.
type torchRelease struct {
	releaseRow
	// big32 are the CUDA compute capability majors whose cuBLAS workspace
	// is 32 MiB (4096 KiB × 8); others get ":4096:2:16:8", 2 × 4 MiB + 8
	// × 16 KiB. sm90Only: only compute capability 9.0 itself.
	big32    []int
	sm90Only bool
	// perGEMM: the CUDA workspace is taken for each GEMM and given back
	// (TORCH_CUBLAS_WORKSPACE_CACHE off by default); the freed block stays
	// in the allocator's cache, so reserved holds it as before, and the
	// replay keeps it allocated throughout (allocated, between GEMMs, ≤ its
	// size high).
	perGEMM bool
	// ROCm: the hipBLAS/rocBLAS workspace (MI300-class gfx94x/gfx95x and
	// others) and hipBLASLt's, each kept per handle and stream.
	rocBLAS, rocBLASMI300, hipBLASLt Bytes
}

// torchReleases are the modelled releases, oldest first. The release of a
// change merged between branch cuts is the first cut after its merge
// (RELEASE.md's cadence table), not read from a tag.
var torchReleases = []torchRelease{
	{releaseRow: releaseRow{Version: "2.1.0", Source: "pytorch aten/src/ATen/cuda/CublasHandlePool.cpp (26a39059) 147-150: \":4096:2:16:8 default, 32MiB for Hopper\", sm90 = major == 9 && minor == 0; the workspace a persistent caching-allocator block per handle and stream (getNewWorkspace); on ROCm torch sets none (rocBLAS keeps its own) and hipBLASLt's 1 MiB is taken per call"},
		sm90Only: true},
	{releaseRow: releaseRow{Version: "2.6.0", Source: "pytorch#138791 (ROCm: 32 MiB hipBLAS workspace, 128 MiB on MI300-class, gfx94x/gfx95x by #145227), pytorch#139300 (hipBLASLt 76 MiB, 76*1024 KiB), both merged before the 2.6 cut; CUDA as 2.1"},
		sm90Only: true, rocBLAS: 32 * MiB, rocBLASMI300: 128 * MiB},
	{releaseRow: releaseRow{Version: "2.9.0", Source: "pytorch#156495 (merged 2025-06-27): the cuBLASLt/hipBLASLt workspace kept per handle and stream (getCUDABlasLtWorkspace), no longer taken per call: hipBLASLt's 76 MiB held on ROCm; CUDA's cuBLASLt 1 MiB not counted (separate only without TORCH_CUBLASLT_UNIFIED_WORKSPACE, unmeasured)"},
		sm90Only: true, rocBLAS: 32 * MiB, rocBLASMI300: 128 * MiB, hipBLASLt: 76 * MiB},
	{releaseRow: releaseRow{Version: "2.12.0", Source: "pytorch#175344 (merged 2026-02-19, after the 2.11 cut): 32 MiB for compute capability majors 9, 10 and 12 (Hopper, Blackwell, RTX 50 / GB10); cuBLASLt shares the cuBLAS workspace (#173002)"},
		big32: []int{9, 10, 12}, rocBLAS: 32 * MiB, rocBLASMI300: 128 * MiB, hipBLASLt: 76 * MiB},
	{releaseRow: releaseRow{Version: "2.14.0", Source: "pytorch#189312 (merged 2026-07-09): 32 MiB for major 11 (Thor) too"},
		big32: []int{9, 10, 11, 12}, rocBLAS: 32 * MiB, rocBLASMI300: 128 * MiB, hipBLASLt: 76 * MiB},
	{releaseRow: releaseRow{Version: "2.15.0", Source: "torch 2.15.0's libtorch_cuda.so (cu132): parseChosenWorkspaceSize 32 MiB for majors 9-12, else 8,519,680 B; isCUDABlasWorkspaceCachingEnabled reads TORCH_CUBLAS_WORKSPACE_CACHE, off by default, so each GEMM takes the workspace and frees it; CublasHandlePool.cpp 181 (ROCm 128 MiB for gfx942/gfx950), 253 (hipBLASLt 76*1024 KiB), 226 (ROCm keeps caching on)"},
		big32: []int{9, 10, 11, 12}, perGEMM: true, rocBLAS: 32 * MiB, rocBLASMI300: 128 * MiB, hipBLASLt: 76 * MiB},
}

// CurrentTorch is the PyTorch release a plan that names none is modelled
// with.
var CurrentTorch = torchReleases[len(torchReleases)-1].Version

// torchReleaseOf resolves a plan's PyTorch release (versions.torch).
func torchReleaseOf(asked string) (torchRelease, Modelled, error) {
	return resolveRelease("torch", asked, torchReleases)
}

// gemmWorkspace is what PyTorch's GEMM libraries keep through the caching
// allocator on g under the torch release asked (empty: the current one;
// a nil GPU: a CUDA part before Hopper), which the first matmul allocates:
// cuBLAS's workspace on CUDA; hipBLAS's and hipBLASLt's on ROCm; none on
// a part PyTorch drives without them (Apple's Metal, Gaudi's HPU). A
// release that cannot be read counts as the current one: the plan's
// versions are checked where the plan is read (ApplyVersions).
func gemmWorkspace(g *GPU, asked string) Bytes {
	rel, _, err := torchReleaseOf(asked)
	if err != nil {
		rel = torchReleases[len(torchReleases)-1]
	}
	const small = 4096*KiB*2 + 16*KiB*8
	if g == nil {
		return small
	}
	switch g.platform() {
	case platformROCm:
		if g.mi300Class() {
			return rel.rocBLASMI300 + rel.hipBLASLt
		}
		return rel.rocBLAS + rel.hipBLASLt
	case platformCUDA:
	default:
		return 0
	}
	major, minor := g.ComputeCapability/10, g.ComputeCapability%10
	if rel.sm90Only && major == 9 && minor == 0 || slices.Contains(rel.big32, major) {
		return 32 * MiB
	}
	return small
}
