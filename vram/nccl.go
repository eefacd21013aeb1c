package vram

import "fmt"

// NCCL's device memory, per communicator, as NCCL allocates it (NVIDIA/nccl
// at the release named; paths are NCCL's src/). A rank keeps, for each
// process group it belongs to (data, tensor, context, expert or pipeline
// parallel), the buffers of that group's communicator:
//   - fixed costs at init: three small device allocations per channel and
//     two per communicator (channel.cc:44-60, init.cc:587-590), each one
//     2 MiB granule under cuMem (alloc.h:317-318; the default since 2.19);
//   - a collective's ring: per channel one send and one receive connection
//     to the ring's neighbours, each holding the LL, LL128 and Simple
//     buffers (512 KiB, 4.6875 MiB, 4 MiB: init.cc:810-813, all three
//     whatever NCCL_PROTO: p2p.cc:486-490), aligned to 2 MiB (p2p.cc:
//     407-410): 2 MiB sent and 10 MiB received on compute capability 9.x
//     and 10.x, 6 and 6 on an A100 (P2P read, graph/paths.cc:416-417);
//     across nodes the network transport's 10 MiB each way (net.cc:
//     916-957, 1100-1102);
//   - NVLink SHARP on NVSwitch parts (compute capability ≥ 9.0, more than
//     two GPUs of the group in the node, two or more since 2.28.7: the
//     release's nvlsMinGPUs): NVLS channels × 2 × a slot × the node's GPUs
//     of the group (nvls.cc:409-430; the slot 1 MiB since 2.22.3, 3 MiB
//     in 2.21.5, 6 MiB before);
//   - send/recv (pipeline stages, all-to-all): per peer in the node, the
//     per-peer channels' connections (32 channels, 12 MiB each way pair:
//     paths.cc:935-1004, enqueue.cc:2651-2683); across nodes one shared
//     pool per direction of p2p channels × 16 steps × 128 KiB (net.cc:
//     646-679, init.cc:818-842).
// Since 2.22.3 a communicator connects an algorithm's buffers only when it
// first runs it (NCCL_RUNTIME_CONNECT, init.cc:61, 1552; group.cc:147-195);
// before, all at init, with a tree beside the ring and the p2p network
// pool of 256 MiB (init.cc:1561-1626 at v2.30.7-1, net.cc:726-730).
// Channel counts are NCCL's topology search's; the engine takes what NCCL
// logs on the parts (ncclChannels). Parts without NVSwitch in the catalog
// (PCIe cards, NVLink pairs, AMD's RCCL) keep a measured default per group
// (ncclPerGroup), as does a plan that gives its own figure
// (Training.NCCLMemory).

// ncclRelease is one modelled NCCL release.
type ncclRelease struct {
	releaseRow
	lazy     bool  // NCCL_RUNTIME_CONNECT: buffers on first use (2.22.3+)
	cuMem    bool  // cuMem allocations rounded to a 2 MiB granule (2.19+)
	nvlsSlot Bytes // NVLS buffer per channel slot
	// nvlsMinGPUs is the fewest GPUs of the communicator in the node
	// (ncclTopoGetGpuCount) with which ncclNvlsInit turns NVLS on.
	nvlsMinGPUs int
}

// ncclReleases are the modelled releases, oldest first.
var ncclReleases = []ncclRelease{
	{releaseRow: releaseRow{Version: "2.18.3", Source: "nccl v2.18.3-1: eager connection at init (no NCCL_RUNTIME_CONNECT), cuMem off by default; nvls.cc: the Simple buffer plus 2 MiB per channel slot, 239 (no NVLS on two GPUs or fewer)"},
		nvlsSlot: 6 * MiB, nvlsMinGPUs: 3},
	{releaseRow: releaseRow{Version: "2.21.5", Source: "nccl v2.21.5-1: eager connection at init (init.cc has no NCCL_RUNTIME_CONNECT), cuMem on (NCCL_CUMEM_ENABLE auto); nvls.cc:310-314 (128 KiB chunk × 8 steps plus 2 MiB per channel slot), 241 (no NVLS on two GPUs or fewer)"},
		cuMem: true, nvlsSlot: 3 * MiB, nvlsMinGPUs: 3},
	{releaseRow: releaseRow{Version: "2.26.2", Source: "nccl v2.26.2-1 (torch 2.7.0's nvidia-nccl-cu12==2.26.2): init.cc:50 (NCCL_RUNTIME_CONNECT 1), 1135 (runtime connect needs cuMem), 606-619 (buffer sizes); misc/cudawrap.cc:13 (NCCL_CUMEM_ENABLE auto); transport/nvls.cc:149, 289-291 (128 KiB chunk × 8 steps per slot), 160 (no NVLS on two GPUs or fewer)"},
		lazy: true, cuMem: true, nvlsSlot: 1 * MiB, nvlsMinGPUs: 3},
	{releaseRow: releaseRow{Version: "2.27.3", Source: "nccl v2.27.3-1 (torch 2.8.0's nvidia-nccl-cu12==2.27.3): init.cc:52 (NCCL_RUNTIME_CONNECT 1), 1148 (runtime connect needs cuMem), 618-620 (buffer sizes); misc/cudawrap.cc:14 (NCCL_CUMEM_ENABLE auto); transport/nvls.cc:152, 334-335 (128 KiB chunk × 8 steps per slot), 160 (no NVLS on two GPUs or fewer)"},
		lazy: true, cuMem: true, nvlsSlot: 1 * MiB, nvlsMinGPUs: 3},
	{releaseRow: releaseRow{Version: "2.30.7", Source: "nccl v2.30.7-1 (torch 2.15.0's nvidia-nccl-cu13==2.30.7): init.cc:61, 1552 (runtime connect), 810-813 (buffer sizes); nvls.cc:409-430 (128 KiB chunk × 8 steps per slot), 262 (NVLS from two GPUs, since 2.28.7); p2p.cc:407-410, 486-490; net.cc:646-679"},
		lazy: true, cuMem: true, nvlsSlot: 1 * MiB, nvlsMinGPUs: 2},
}

// CurrentNCCL is the NCCL release a plan that names none is modelled with:
// torch 2.15.0's.
var CurrentNCCL = ncclReleases[len(ncclReleases)-1].Version

// ncclPerGroup is the device memory per process group where the engine has
// no rule for the part: measured 544–688 MB on 4×A100 NVLink
// (NVIDIA/nccl#964); a default, to be replaced by a measurement of your
// cluster (Training.NCCLMemory).
const ncclPerGroup = 600 * MiB

// nodeGPUs is the GPUs of a node NCCL connects by NVLink: an HGX/DGX node
// (a GB200/GB300 rack's 72-GPU NVLink domain is not modelled apart).
const nodeGPUs = 8

// ncclTraffic is what a communicator is used for.
type ncclTraffic int

const (
	ncclCollectives ncclTraffic = iota // all-reduce, all-gather, reduce-scatter (ring, NVLS)
	ncclNeighbours                     // pipeline stages: send and receive to the stage before and after
	ncclAllToAll                       // expert parallelism's token dispatch: every peer
	// ncclWarmUp: only a one-element all-reduce so far, the serving
	// engines' warm-up (serving_nccl.go). NCCL's tuner gives it the ring's
	// LL protocol: in a node the ring's latency, 6.6 µs + 0.6 µs a step,
	// is under the tree's, 6.8 µs + 0.6 µs a step, and NVLS's 25 µs
	// (graph/tuning.cc:134-147 at v2.27.3-1).
	ncclWarmUp
)

// ncclComm is one communicator of a rank.
type ncclComm struct {
	group   string // dp, tp, cp, ep, pp
	ranks   int
	local   int // the group's ranks on this rank's node
	traffic ncclTraffic
	// noNVLS: NCCL_NVLS_ENABLE=0, no NVLink SHARP (transport/nvls.cc:160
	// at v2.27.3-1).
	noNVLS bool
}

// ncclComms are the communicators of a rank of the resolved plan, the mesh
// laid out as torchtitan and Megatron-LM lay it out: tensor parallelism
// innermost, then context, data (expert parallelism within it), pipeline
// outermost, nodeGPUs to a node.
func (r *resolved) ncclComms() []ncclComm {
	var out []ncclComm
	stride := 1
	add := func(group string, n int, t ncclTraffic) {
		if n > 1 {
			local := 1
			if stride < nodeGPUs {
				local = min(n, max(1, nodeGPUs/stride))
			}
			out = append(out, ncclComm{group: group, ranks: n, local: local, traffic: t})
		}
	}
	add("tp", r.tp, ncclCollectives)
	stride *= max(1, r.tp)
	add("cp", r.cp, ncclCollectives)
	stride *= max(1, r.cp)
	add("ep", r.ep, ncclAllToAll)
	add("dp", r.dp, ncclCollectives)
	stride *= max(1, r.dp)
	add("pp", r.pp, ncclNeighbours)
	return out
}

// ncclChannels are the collective channels NCCL's topology search gives a
// communicator on an NVSwitch node, as NCCL logs them ("N coll channels"):
// 24 on 8×A100 and 8×H100 (NVIDIA/nccl#1259's channels 00-23 on H100), 32
// on 8×B200 (nccl#1646's trees [0]…[31]), 16 for a communicator across
// H100 nodes (nccl#1453); NVLS channels 16 on compute capability 9.x, 24
// on 10.x in a node and 32 across nodes (nvls.cc:155-157, 209-214).
func ncclChannels(cc int, acrossNodes bool) (coll, nvls int) {
	coll, nvls = 24, 16
	if cc >= 100 {
		coll, nvls = 32, 24
		if acrossNodes {
			nvls = 32
		}
	}
	if acrossNodes {
		coll = 16
	}
	return coll, nvls
}

// ncclCommBytes is the device memory of communicator c on g under
// release rel, and how it was counted.
func ncclCommBytes(c ncclComm, g GPU, rel ncclRelease) Bytes {
	across := c.local < c.ranks
	coll, nvlsCh := ncclChannels(g.ComputeCapability, across)
	const p2pChannels = 32
	send, recv := 2*MiB, 10*MiB
	if g.ComputeCapability < 90 {
		send, recv = 6*MiB, 6*MiB // P2P read on an A100: Simple on the sender's side
	}
	nvls, granules := Bytes(0), 3*max(coll, p2pChannels)+2
	if g.ComputeCapability >= 90 && c.local >= rel.nvlsMinGPUs && !c.noNVLS {
		nvls = Bytes(nvlsCh) * 2 * rel.nvlsSlot * Bytes(c.local)
		granules += nvlsCh + 1 // each NVLS channel's peers, and the credits (channel.cc:98, nvls.cc:521-533)
	}
	var b Bytes
	if rel.cuMem {
		b = 2 * MiB * Bytes(granules)
	}
	ring := Bytes(coll) * (send + recv)
	if across {
		ring = Bytes(coll) * (10*MiB + recv) // a node's edge receives or sends over the network
	}
	pool := Bytes(p2pChannels) * 16 * 512 * KiB // the network p2p pool eager releases set up at init
	switch {
	case c.traffic == ncclWarmUp && rel.lazy:
		b += ring // the warm-up's ring alone; NVLS's buffers come with its first use
	case c.traffic == ncclCollectives && rel.lazy:
		b += ring + nvls
	case c.traffic == ncclCollectives || c.traffic == ncclWarmUp:
		b += ring + nvls + pool
		if c.ranks > 2 {
			b += Bytes(coll) * recv // the tree's extra connection at its root (transport/generic.cc:49-60)
		}
	case c.traffic == ncclNeighbours:
		b += p2pBytes(c, min(2, c.ranks-1), send+recv)
		if !rel.lazy {
			b += ring + pool
		}
	case c.traffic == ncclAllToAll:
		b += p2pBytes(c, c.ranks-1, send+recv)
		if !rel.lazy {
			b += ring + pool
		}
	}
	return b
}

// p2pBytes is send/recv's memory to peers peers: 32 channels each way to
// each peer in the node, and for peers across nodes one shared send and
// one receive pool of 16 p2p channels × 16 steps × 128 KiB.
func p2pBytes(c ncclComm, peers int, pair Bytes) Bytes {
	inNode := max(0, min(peers, c.local-1))
	b := Bytes(inNode) * 32 * pair
	if peers > inNode {
		b += 2 * 16 * 16 * 128 * KiB
	}
	return b
}

// ncclRelease resolves the plan's NCCL release (versions.nccl).
func ncclReleaseOf(asked string) (ncclRelease, Modelled, error) {
	return resolveRelease("nccl", asked, ncclReleases)
}

// ncclBytes is NCCL's device memory on a rank with communicators comms on
// g: the release's buffers on an NVSwitch part, else ncclPerGroup each.
func ncclBytes(comms []ncclComm, g *GPU, asked string) (Bytes, error) {
	rel, _, err := ncclReleaseOf(asked)
	if err != nil {
		return 0, err
	}
	var b Bytes
	for _, c := range comms {
		if g == nil || !g.NVSwitch {
			b += ncclPerGroup
			continue
		}
		b += ncclCommBytes(c, *g, rel)
	}
	return b, nil
}

// ncclHostBytes is the host-pinned memory of communicator c under rel:
// the work FIFO (NCCL_WORK_FIFO_BYTES, 1 MiB from 2.22.3, init.cc:394-395,
// 640; 32 MiB of 64 Ki × 512-byte work elements before, v2.21.5-1
// init.cc:257, 416-433) and, where the ring crosses nodes, each channel's
// network send connection's LL buffer and connection info, 520 KiB
// (net.cc:939-957).
func ncclHostBytes(c ncclComm, g GPU, rel ncclRelease) Bytes {
	fifo := 32 * MiB
	if rel.lazy {
		fifo = 1 * MiB
	}
	if c.local < c.ranks {
		coll, _ := ncclChannels(g.ComputeCapability, true)
		fifo += Bytes(coll) * 520 * KiB
	}
	return fifo
}

// ncclNote says how NCCL's memory was counted.
func ncclNote(comms []ncclComm, g *GPU, asked string) string {
	if len(comms) == 0 {
		return ""
	}
	rel, m, _ := ncclReleaseOf(asked)
	if g == nil || !g.NVSwitch {
		return fmt.Sprintf("NCCL: %d communicator(s) at %v each, a measured default (nvidia/nccl#964) for a GPU without NVSwitch in the catalog; give nccl_memory from your cluster", len(comms), ncclPerGroup)
	}
	s := fmt.Sprintf("NCCL %s on %s: ", m.Release, g.Name)
	for i, c := range comms {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (%d ranks, %d in the node) %v", c.group, c.ranks, c.local, ncclCommBytes(c, *g, rel))
	}
	var host Bytes
	for _, c := range comms {
		host += ncclHostBytes(c, *g, rel)
	}
	return s + fmt.Sprintf(" (ring and NVLS buffers of the channels NCCL logs on these parts, send/recv's per peer; nccl.go); and %v of pinned host memory (work FIFOs, network send buffers)", host)
}

// resolveNCCL checks the plan's settings of what lies outside PyTorch: an
// NCCL release the table reads, a measured figure within the plan's
// bounds, and the other processes' contexts (Training.OtherProcesses).
func (r *resolved) resolveNCCL() error {
	if _, _, err := ncclReleaseOf(r.NCCL); err != nil {
		return err
	}
	if r.NCCLMemory < 0 || r.NCCLMemory > maxPlanBytes {
		return fmt.Errorf("nccl_memory must be in [0, %d] bytes, got %d", int64(maxPlanBytes), int64(r.NCCLMemory))
	}
	if r.OtherProcesses < 0 || r.OtherProcesses > maxOtherProcesses {
		return fmt.Errorf("other_processes must be in [0, %d] (processes beside the training process with a CUDA context on each GPU), got %d", maxOtherProcesses, r.OtherProcesses)
	}
	return nil
}

// maxOtherProcesses bounds Training.OtherProcesses: more processes than a
// GPU runs at once.
const maxOtherProcesses = 64
