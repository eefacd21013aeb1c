package vram

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The advisor: what would make a training plan fit its budget. Each
// change the plan can take is tried alone; where fewer than three alone
// make it fit, changes are combined, two and then three at a time, from
// groups that do not overrule each other (one checkpointing setting, one
// optimizer, one precision, one kind of adapter, one sharding), and the
// combinations that fit are ranked by what they cost the run (price: a
// fused kernel costs nothing, recomputation some compute, an adapter
// quality, more GPUs money, shorter sequences the task). A change that
// saves less than 1 % of the peak is not offered.

// Advice is one change to a plan, or a combination of changes, with what
// it does to the peak.
type Advice struct {
	// Kind is what the change is, for saying it in a framework's own
	// settings (Flags); Kinds every change of a combination (Kind is the
	// first).
	Kind   AdviceKind   `json:"kind"`
	Kinds  []AdviceKind `json:"kinds,omitempty"`
	Change string       `json:"change"` // what to do, in words
	Cost   string       `json:"cost"`   // what it costs, in words
	Plan   Training     `json:"-"`
	Peak   Bytes        `json:"peak"`  // allocated peak after the change
	Saves  Bytes        `json:"saves"` // peak before − after
	// Need is the changed plan's figure in the budget's measure
	// (device-used by default) and Fits whether it is within the limit;
	// Over is how far above the limit it still is (zero when it fits).
	Need Bytes `json:"need"`
	Fits bool  `json:"fits"`
	Over Bytes `json:"over,omitempty"`
	// Price ranks what the changes cost the run, summed (see adviceGroup).
	Price   int      `json:"price"`
	members []string // the single changes combined
}

// changes are the advice's kinds: Kinds, or Kind alone.
func (a Advice) changes() []AdviceKind {
	if len(a.Kinds) > 0 {
		return a.Kinds
	}
	return []AdviceKind{a.Kind}
}

// Advise lists changes that lower the plan's allocated peak: single
// changes, and combinations where fewer than three single changes make it
// fit. Those that fit the budget (in its measure, device-used by default)
// come first, those on the plan's own GPUs before those asking for more,
// then by price, then fewer changes; then the rest by memory saved. Changes that do not apply
// (already set, or invalid for the plan) or save under 1 % are left out.
func Advise(t Training, b Budget) ([]Advice, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	base, err := t.Estimate()
	if err != nil {
		return nil, err
	}
	before := base.Peak.Total()
	singles := tryAll(t, b, frameworkKnobs(t, adviceCandidates(&r)), before, false)
	out := singles
	if fitting(singles) < 3 {
		out = append(out, tryAll(t, b, combinations(singles, 2), before, true)...)
		if fitting(out) == 0 {
			out = append(out, tryAll(t, b, combinations(singles, 3), before, true)...)
		}
	}
	out = minimal(out, func(a Advice) ([]string, bool) { return a.members, a.Fits })
	sort.SliceStable(out, func(i, j int) bool { return adviceBefore(out[i], out[j]) })
	return out, nil
}

// minimal drops each combination of which a smaller one that fits is a
// part: a change that adds nothing to a fit is not advice.
func minimal[A any](as []A, of func(A) (members []string, fits bool)) []A {
	var out []A
	for _, a := range as {
		ma, _ := of(a)
		redundant := false
		for _, b := range as {
			mb, fits := of(b)
			if fits && len(mb) < len(ma) && !slices.ContainsFunc(mb, func(m string) bool { return !slices.Contains(ma, m) }) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, a)
		}
	}
	return out
}

// frameworkKnobs keeps the changes the plan's framework has a setting for,
// where the plan names its framework.
func frameworkKnobs(t Training, cs []adviceCand) []adviceCand {
	if t.Framework == "" {
		return cs
	}
	var out []adviceCand
	for _, c := range cs {
		if frameworkFlags(t.Framework, c.kinds[0], t) != "" {
			out = append(out, c)
		}
	}
	return out
}

// adviceBefore ranks two pieces of advice (Advise).
func adviceBefore(a, b Advice) bool {
	if a.Fits != b.Fits {
		return a.Fits
	}
	if !a.Fits {
		return a.Saves > b.Saves
	}
	if ma, mb := a.moreGPUs(), b.moreGPUs(); ma != mb {
		return mb // the plan's own hardware first
	}
	if a.Price != b.Price {
		return a.Price < b.Price
	}
	if len(a.changes()) != len(b.changes()) {
		return len(a.changes()) < len(b.changes())
	}
	return a.Saves > b.Saves
}

// moreGPUs tells advice that asks for more hardware.
func (a Advice) moreGPUs() bool { return slices.Contains(a.changes(), AdviceMoreGPUs) }

func fitting(as []Advice) int {
	n := 0
	for _, a := range as {
		if a.Fits {
			n++
		}
	}
	return n
}

// tryAll judges each candidate on its own core, keeping those that save
// at least 1 % of the peak (and, with onlyFits, only those that fit), in
// the candidates' order.
func tryAll(t Training, b Budget, cands []adviceCand, before Bytes, onlyFits bool) []Advice {
	tried := make([]*Advice, len(cands))
	forEach(len(cands), func(i int) {
		if a := tryAdvice(t, b, cands[i], before, onlyFits); a != nil && (a.Fits || !onlyFits) {
			tried[i] = a
		}
	})
	var out []Advice
	for _, a := range tried {
		if a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// tryAdvice is change c applied to t, judged against the budget: nil when
// it is invalid for the plan or saves under 1 % of the peak before, and
// with onlyFits when its allocated peak alone is past the limit (which
// the replay would only confirm).
func tryAdvice(t Training, b Budget, c adviceCand, before Bytes, onlyFits bool) *Advice {
	nt := t
	if t.LoRA != nil {
		l := *t.LoRA
		nt.LoRA = &l
	}
	c.edit(&nt)
	est, err := nt.Estimate()
	if err != nil {
		return nil
	}
	p := est.Peak.Total()
	if p >= before || (before-p)*100 < before || onlyFits && p > b.Limit() {
		return nil
	}
	v, err := b.judgeTraining(nt, true)
	if err != nil {
		return nil
	}
	a := &Advice{Kind: c.kinds[0], Change: c.change, Cost: c.cost, Plan: nt, Peak: p, Saves: before - p, Need: v.Need, Fits: v.Fits, Price: c.price,
		members: c.members}
	if len(c.kinds) > 1 {
		a.Kinds = c.kinds
	}
	if !v.Fits && v.Need > v.Limit {
		a.Over = v.Need - v.Limit
	}
	return a
}

// adviceCand is one change (or combination) Advise tries.
type adviceCand struct {
	kinds        []AdviceKind
	change, cost string
	price        int
	members      []string // the single changes it makes
	edit         func(*Training)
}

// adviceGroup is what a kind of change sets, and its price: changes of
// one group overrule each other, so a combination takes one of each.
// QLoRA also sets the precision (a 4-bit base computes in bf16).
var adviceGroup = map[AdviceKind]struct {
	group string
	price int
}{
	AdviceFusedAttention: {"attention", 1}, AdviceFusedLoss: {"loss", 1}, AdviceFusedOptimizer: {"optimizer_impl", 1},
	AdviceSelective: {"checkpointing", 2}, AdviceAutocast: {"precision", 2}, AdviceZeRO: {"sharding", 2},
	Advice8BitAdamW: {"optimizer", 3}, AdviceSmallerMicroBatch: {"micro_batch", 3}, AdviceFullCheckpointing: {"checkpointing", 4},
	AdvicePureBF16: {"precision", 5}, AdviceAdafactor: {"optimizer", 5}, AdviceOffloadOptimizer: {"offload", 6},
	AdviceLoRA: {"trainable", 7}, AdviceQLoRA: {"trainable", 8}, AdviceMoreGPUs: {"sharding", 9}, AdviceShorterSequences: {"seq_len", 10},
}

// sets tells whether a change of kind k sets group g.
func sets(k AdviceKind, g string) bool {
	return adviceGroup[k].group == g || k == AdviceQLoRA && g == "precision"
}

// combinations are the n-change combinations of the single changes that
// each saved something, one of a group each (at most the eight that
// saved most enter the combinations of three).
func combinations(singles []Advice, n int) []adviceCand {
	pool := make([]Advice, len(singles))
	copy(pool, singles)
	sort.SliceStable(pool, func(i, j int) bool { return pool[i].Saves > pool[j].Saves })
	if n > 2 && len(pool) > 8 {
		pool = pool[:8]
	}
	var out []adviceCand
	for _, idx := range combinationsOf(len(pool), n, func(i, j int) bool { return clashes(pool[i], pool[j]) }) {
		chosen := make([]Advice, len(idx))
		for k, i := range idx {
			chosen[k] = pool[i]
		}
		out = append(out, combine(chosen))
	}
	return out
}

// combinationsOf are the sets of n of count items, as ascending indexes,
// in which no two clash: the combinations every advisor tries.
func combinationsOf(count, n int, clash func(i, j int) bool) [][]int {
	var out [][]int
	var pick func(start int, chosen []int)
	pick = func(start int, chosen []int) {
		if len(chosen) == n {
			out = append(out, slices.Clone(chosen))
			return
		}
		for i := start; i < count; i++ {
			if !slices.ContainsFunc(chosen, func(j int) bool { return clash(i, j) }) {
				pick(i+1, append(chosen, i))
			}
		}
	}
	pick(0, nil)
	return out
}

// clashes tells whether two changes set something in common.
func clashes(a, b Advice) bool {
	for _, k := range a.changes() {
		for _, l := range b.changes() {
			if sets(l, adviceGroup[k].group) || sets(k, adviceGroup[l].group) {
				return true
			}
		}
	}
	return false
}

// combine is the candidate that makes every chosen change, in order, from
// the plans each made alone.
func combine(chosen []Advice) adviceCand {
	var c adviceCand
	var changes, costs []string
	var plans []Training
	for _, a := range chosen {
		c.kinds = append(c.kinds, a.changes()...)
		c.price += a.Price
		changes, costs = append(changes, a.Change), append(costs, a.Cost)
		plans = append(plans, a.Plan)
		c.members = append(c.members, a.members...)
	}
	c.change, c.cost = strings.Join(changes, " + "), strings.Join(costs, "; ")
	kinds := c.kinds
	c.edit = func(t *Training) {
		for i, p := range plans {
			applyAdvice(t, p, kinds[i])
		}
	}
	return c
}

// applyAdvice makes on t the change of kind k that made plan p.
func applyAdvice(t *Training, p Training, k AdviceKind) {
	switch adviceGroup[k].group {
	case "checkpointing":
		t.Checkpointing, t.CheckpointEvery = p.Checkpointing, p.CheckpointEvery
	case "attention":
		t.Attention = p.Attention
	case "loss":
		t.Loss = p.Loss
	case "optimizer_impl":
		t.OptimizerImpl = p.OptimizerImpl
	case "optimizer":
		t.Optimizer, t.OptimizerStateDType = p.Optimizer, p.OptimizerStateDType
	case "precision":
		t.Precision, t.WeightsDType, t.ComputeDType, t.GradsDType, t.MasterWeights, t.Autocast = p.Precision, p.WeightsDType, p.ComputeDType, p.GradsDType, p.MasterWeights, p.Autocast
	case "trainable":
		t.LoRA, t.Trainable, t.QuantizedBase = p.LoRA, p.Trainable, p.QuantizedBase
		if k == AdviceQLoRA {
			t.Precision, t.WeightsDType, t.ComputeDType, t.GradsDType, t.MasterWeights = p.Precision, p.WeightsDType, p.ComputeDType, p.GradsDType, p.MasterWeights
		}
	case "sharding":
		t.Parallel.DP, t.Parallel.ZeRO, t.Parallel.ShardDegree = p.Parallel.DP, p.Parallel.ZeRO, p.Parallel.ShardDegree
	case "offload":
		t.Parallel.CPUOffload = p.Parallel.CPUOffload
	case "micro_batch":
		t.MicroBatch, t.GradAccum = p.MicroBatch, p.GradAccum
	case "seq_len":
		t.SeqLen = p.SeqLen
	}
}

// adviceCandidates are the single changes that apply to the plan r
// resolved.
func adviceCandidates(r *resolved) []adviceCand {
	var cs []adviceCand
	addK := func(kind AdviceKind, change, cost string, edit func(*Training)) {
		cs = append(cs, adviceCand{kinds: []AdviceKind{kind}, change: change, cost: cost, price: adviceGroup[kind].price, members: []string{change}, edit: edit})
	}
	if r.Checkpointing == CheckpointNone {
		addK(AdviceSelective, "selective activation recomputation", "recomputes the attention internals: a few % more compute (Korthikanti et al. 2022)", func(t *Training) { t.Checkpointing = CheckpointSelective })
	}
	if r.Checkpointing != CheckpointFull {
		addK(AdviceFullCheckpointing, "full activation checkpointing", "one more forward pass per step: about a third more compute", func(t *Training) { t.Checkpointing, t.CheckpointEvery = "full", 0 })
	}
	if r.Attention == "eager" {
		addK(AdviceFusedAttention, "fused attention (SDPA / FlashAttention)", "none in memory terms; needs a supported GPU and dtype", func(t *Training) { t.Attention = "sdpa" })
	}
	if r.Loss == "cross_entropy" && r.m.Head == "lm" {
		addK(AdviceFusedLoss, "fused linear cross-entropy (e.g. Liger)", "a kernel dependency; logits are never materialised", func(t *Training) { t.Loss = "fused" })
	}
	if r.Optimizer != "none" && r.OptimizerImpl == "foreach" {
		addK(AdviceFusedOptimizer, "fused optimizer step (fused=True)", "none; a single kernel without foreach temporaries", func(t *Training) { t.OptimizerImpl = "fused" })
	}
	switch r.Optimizer {
	case "adamw", "adam", "paged_adamw":
		addK(Advice8BitAdamW, "8-bit AdamW states (bitsandbytes)", "blockwise-quantized moments: small accuracy risk, usually on par (Dettmers et al. 2022)", func(t *Training) { t.Optimizer, t.OptimizerStateDType = "adamw_8bit", 0 })
		addK(AdviceAdafactor, "Adafactor (factored second moment)", "different update rule: may need retuning of the learning rate", func(t *Training) { t.Optimizer, t.OptimizerStateDType = "adafactor", 0 })
	}
	if r.WeightsDType == FP32 && !r.Autocast {
		addK(AdviceAutocast, "bf16 mixed precision (autocast)", "bf16 matmuls: numerically safe on Ampere+; weights stay fp32", func(t *Training) { t.Precision, t.ComputeDType, t.Autocast = "amp_bf16", 0, false })
		addK(AdvicePureBF16, "pure bf16 training", "no fp32 master copy: rounding in updates, watch convergence", func(t *Training) {
			t.Precision, t.WeightsDType, t.ComputeDType, t.GradsDType, t.MasterWeights = "bf16", 0, 0, 0, 0
		})
	}
	if !r.frozen {
		addK(AdviceLoRA, "LoRA (rank 16 on attention and MLP)", "trains adapters only: a lower quality ceiling than full fine-tuning on large shifts", func(t *Training) {
			t.LoRA, t.Trainable = &LoRA{Rank: 16, Targets: []string{"all_linear"}}, "lora"
		})
		addK(AdviceQLoRA, "QLoRA (nf4 base + rank-16 LoRA)", "4-bit base: dequantization slows steps (~30%), small accuracy risk", func(t *Training) {
			t.LoRA, t.Trainable = &LoRA{Rank: 16, Targets: []string{"all_linear"}}, "lora"
			t.QuantizedBase = Quant{DType: NF4, DoubleQuant: true}
			if t.WeightsDType == FP32 || (t.WeightsDType == DTypeUnset && (t.Precision == "" || t.Precision == "fp32")) {
				t.Precision, t.WeightsDType, t.ComputeDType, t.GradsDType, t.MasterWeights = "bf16", 0, 0, 0, 0
			}
		})
	}
	if r.dp > 1 && r.Parallel.ZeRO < 3 {
		for z := r.Parallel.ZeRO + 1; z <= 3; z++ {
			cost := map[int]string{1: "none beyond DDP's all-reduce", 2: "none beyond DDP (reduce-scatter + all-gather)", 3: "parameters are all-gathered every forward and backward: 1.5× DDP traffic"}[z]
			addK(AdviceZeRO, fmt.Sprintf("ZeRO stage %d over the %d data-parallel GPUs", z, r.dp), cost, func(t *Training) { t.Parallel.ZeRO = z })
		}
	}
	addK(AdviceMoreGPUs, "twice the GPUs with ZeRO-3/FSDP full sharding", "more GPUs; all-gathers every step", func(t *Training) {
		t.Parallel.DP, t.Parallel.ZeRO, t.Parallel.ShardDegree = r.dp*2, 3, 0
	})
	if r.Parallel.CPUOffload == "none" && r.Optimizer != "none" {
		addK(AdviceOffloadOptimizer, "offload optimizer states to the CPU", "the step runs on the CPU: slower steps and host memory of 12+ bytes/param", func(t *Training) { t.Parallel.CPUOffload = "optimizer" })
	}
	if r.MicroBatch > 1 {
		addK(AdviceSmallerMicroBatch, fmt.Sprintf("micro_batch %d with grad_accum ×%d (same global batch)", r.MicroBatch/2, 2), "more micro-steps per update: lower GPU utilisation", func(t *Training) {
			t.MicroBatch /= 2
			t.GradAccum = max(1, t.GradAccum) * 2
		})
	}
	if r.SeqLen >= 256 {
		addK(AdviceShorterSequences, fmt.Sprintf("shorter sequences (%d tokens)", r.SeqLen/2), "less context per sample: a different task for long inputs", func(t *Training) { t.SeqLen /= 2 })
	}
	return cs
}
