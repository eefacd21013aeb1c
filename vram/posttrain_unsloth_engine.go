package vram

import (
	"fmt"
	"math"
)

// How Unsloth launches its vLLM engine (unsloth-zoo @ ce232d6c,
// unsloth_zoo/vllm_utils.py, "Z"): the gpu_memory_utilization it passes,
// from the one asked (or standby's target), the memory free at load and an
// activation reserve (approximate_vllm_memory_usage, Z:1596-1706), and the
// scheduler limits its estimate of the KV cache picks (Z:2553-2564).

type unslothEngine struct {
	asked, util      float64 // the utilization asked (or standby's) and the one vLLM gets
	maxSeqs, batched int     // max_num_seqs, max_num_batched_tokens
	weights          Quant   // the weights vLLM loads: bitsandbytes 4-bit or 16-bit
}

func newUnslothEngine(run *rlRun, standby bool) (unslothEngine, error) {
	pt := run.pt
	m := pt.Policy.Model
	e := unslothEngine{asked: pt.Rollout.GPUMemoryUtilization, weights: Quant{DType: BF16}}
	fourBit := pt.Policy.QuantizedBase.DType == NF4
	if fourBit {
		e.weights = Quant{DType: NF4} // load_format "bitsandbytes" with load_in_4bit (Z:2352-2353, 2744-2745)
	}
	total := float64(run.g.Total())
	if standby {
		e.asked = unslothStandbyTarget(total)
	}
	seq := int64(pt.PromptLen + pt.CompletionLen)      // max_model_len = max_seq_length (Z:2743)
	free := e.asked * (total - float64(run.g.Context)) // mem_get_info at load: the context alone is taken
	if reserve := unslothActivationReserve(m, seq); total-free < reserve {
		free = total - reserve
	}
	e.util = free / total
	kvLeft := free - unslothModelBytes(m, pt.Policy.LoRA.Rank, fourBit) - unslothGraphOverhead(m)
	kvLeft = max(0, kvLeft)
	kvPerToken := unslothKVSize(m) * 2 * float64(m.Layers) * 2
	if fit := math.Floor(0.95*kvLeft/kvPerToken/256) * 256; fit <= float64(seq) {
		// Z:2403-2414: max_seq_length shrinks to what the estimate holds.
		return e, fmt.Errorf("Unsloth: Your GPU cannot handle sequence lengths of %d due to limited GPU memory (its estimate holds about %.0f tokens)", seq, fit)
	}
	e.batched, e.maxSeqs = unslothScheduler(kvLeft / float64(GiB))
	return e, nil
}

// unslothStandbyTarget is standby's gpu_memory_utilization for vLLM
// 0.11 and later, by a tenth of the card in GiB (Z:2303-2317).
func unslothStandbyTarget(total float64) float64 {
	tenth := total / float64(GiB) * 0.1
	target := 0.75
	for _, tier := range []struct{ atLeast, util float64 }{{4, 0.925}, {2.5, 0.9}, {2, 0.825}, {1.4, 0.8}, {1, 0.775}} {
		if tenth >= tier.atLeast {
			target = tier.util
			break
		}
	}
	return target * 0.95
}

// unslothActivationReserve is what Unsloth keeps out of vLLM's share for
// training's activations: a batch of two sequences' q, k, v, MLP and
// residual, and one MLP weight, in 2 bytes with a quarter more (Z:1649-1660).
func unslothActivationReserve(m Model, seq int64) float64 {
	hd, kv, mlp := float64(m.Hidden), unslothKVSize(m), float64(m.FFN)
	s := float64(seq) * 2
	return (s*(hd+2*kv) + s*2 + s*2*mlp + mlp*hd) * 1.25 * 2
}

// unslothKVSize is the key (or value) width Unsloth's estimate takes:
// hidden // heads × kv heads, whatever the head width (Z:1619-1621).
func unslothKVSize(m Model) float64 {
	heads, kv := max(1, m.Heads), m.KVHeads
	if kv == 0 {
		kv = heads
	}
	return float64(m.Hidden / heads * kv)
}

// unslothModelBytes is Unsloth's estimate of vLLM's weights with the LoRA
// slots (Z:1624-1676).
func unslothModelBytes(m Model, rank int, fourBit bool) float64 {
	hd, kv, mlp, layers := float64(m.Hidden), unslothKVSize(m), float64(m.FFN), float64(m.Layers)
	r := float64(unslothLoRARank(rank))
	qkvo := (2*hd + 2*kv) * hd
	embed := float64(m.Vocab) * hd
	head := embed
	if m.TiedEmbeddings {
		head = 0
	}
	lora := (hd*r*4 + r*(2*hd+2*kv) + hd*r*2 + mlp*r + r*2*mlp + r*hd) * layers * 2
	factor := 1.0
	if fourBit {
		factor = 16.0 / 5
	}
	return (qkvo+3*hd*mlp)*layers*2/factor + (2*hd+embed+head)*2 + lora
}

// unslothLoRARank is the adapter rank rounded up to one vLLM supports
// (Z:1710-1743).
func unslothLoRARank(rank int) int {
	for _, r := range []int{8, 16, 32, 64, 128, 256, 320, 512} {
		if rank <= r {
			return r
		}
	}
	return 512
}

// unslothGraphOverhead is its allowance for CUDA graphs: 172 graphs of
// hidden × layers × 4 bytes, within 0.15 and 1 GiB (Z:1683-1692).
func unslothGraphOverhead(m Model) float64 {
	g := 172 * float64(m.Hidden) * float64(m.Layers) * 4
	return min(max(g, 0.15*float64(GiB)), float64(GiB))
}

// unslothScheduler picks max_num_batched_tokens and max_num_seqs by the
// KV cache it expects, in GiB (Z:2553-2564).
func unslothScheduler(kvGiB float64) (batched, seqs int) {
	for _, tier := range []struct {
		upTo          float64
		batched, seqs int
	}{{2, 2048, 8}, {4, 2048, 16}, {8, 4096, 32}, {12, 4096, 48}, {16, 6144, 64}, {24, 6144, 80}, {40, 8192, 96}, {48, 8192, 112}, {80, 8192, 128}} {
		if kvGiB <= tier.upTo {
			return tier.batched, tier.seqs
		}
	}
	return 8192, 256
}
