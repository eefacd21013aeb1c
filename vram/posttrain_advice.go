package vram

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The post-training advisor: the knobs each framework exposes that change
// what a step keeps on the GPU — the policy's checkpointing and
// micro-batch, its adapter and optimizer, the colocated engine's share of
// the card and its sleep, verl's offload and log-prob micro-batch, and the
// completion length — tried alone and, where fewer than three alone make
// every phase fit, two and three at a time, each said in the framework's
// own flags.

// PostTrainingAdvice is one change to a post-training plan, or a
// combination, with what it does to the largest phase.
type PostTrainingAdvice struct {
	Change  string       `json:"change"` // what to do, in words
	Flags   string       `json:"flags"`  // as the framework takes it
	Cost    string       `json:"cost"`   // what it costs the run
	Plan    PostTraining `json:"-"`
	Need    Bytes        `json:"need"` // the largest phase's device-used after it
	Fits    bool         `json:"fits"`
	Over    Bytes        `json:"over,omitempty"`
	Price   int          `json:"price"`
	Starts  bool         `json:"starts"` // the rollout engine starts
	members []string     // the single changes combined
}

// ptKnob is one change the post-training advisor tries.
type ptKnob struct {
	group, change, flags, cost string
	price                      int
	members                    []string
	edit                       func(*PostTraining)
}

// AdvisePostTraining lists changes that lower the plan's largest phase on
// b's GPU, those that make every phase fit first (the cheapest for the run
// first, then fewer changes), then the rest by how much they lower it.
func AdvisePostTraining(pt PostTraining, b Budget) ([]PostTrainingAdvice, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	r, err := pt.resolve()
	if err != nil {
		return nil, err
	}
	base, err := pt.Estimate(b.GPU)
	if err != nil {
		return nil, err
	}
	before := base.Peak().DeviceUsed
	knobs := ptKnobs(r)
	try := func(ks []ptKnob, onlyFits bool) []PostTrainingAdvice {
		tried := make([]*PostTrainingAdvice, len(ks))
		forEach(len(ks), func(i int) { tried[i] = tryPTKnob(pt, b, ks[i], before, base.Starts, onlyFits) })
		var out []PostTrainingAdvice
		for _, a := range tried {
			if a != nil {
				out = append(out, *a)
			}
		}
		return out
	}
	out := try(knobs, false)
	fits := func() int {
		n := 0
		for _, a := range out {
			if a.Fits {
				n++
			}
		}
		return n
	}
	for n := 2; n <= 3 && fits() < 3 && (n == 2 || fits() == 0); n++ {
		out = append(out, try(combineKnobs(knobs, n), true)...)
	}
	out = minimal(out, func(a PostTrainingAdvice) ([]string, bool) { return a.members, a.Fits })
	sort.SliceStable(out, func(i, j int) bool {
		a, c := out[i], out[j]
		switch {
		case a.Fits != c.Fits:
			return a.Fits
		case !a.Fits:
			return a.Need < c.Need
		case a.Price != c.Price:
			return a.Price < c.Price
		}
		return len(a.members) < len(c.members)
	})
	return out, nil
}

// tryPTKnob is k applied to pt and judged: nil when invalid, when it
// neither lowers the largest phase by 1 % nor starts an engine that would
// not start, or with onlyFits when it does not fit.
func tryPTKnob(pt PostTraining, b Budget, k ptKnob, before Bytes, started, onlyFits bool) *PostTrainingAdvice {
	np := pt.clone()
	k.edit(&np)
	e, err := np.Estimate(b.GPU) // as JudgePostTraining judges it
	if err != nil {
		return nil
	}
	need, limit := e.Peak().DeviceUsed, b.Limit()
	fits := e.Starts && need <= limit
	lower := need < before && (before-need)*100 >= before
	if onlyFits && !fits || !fits && !lower && (started || !e.Starts) {
		return nil
	}
	a := &PostTrainingAdvice{Change: k.change, Flags: k.flags, Cost: k.cost, Plan: np, Need: need, Fits: fits, Price: k.price,
		Starts: e.Starts, members: k.members}
	if !fits && need > limit {
		a.Over = need - limit
	}
	return a
}

// clone copies the plan deeply enough that a knob's edit leaves the
// caller's alone (the rollout, the critic and the policy's adapter).
func (pt PostTraining) clone() PostTraining {
	if pt.Rollout != nil {
		r := *pt.Rollout
		pt.Rollout = &r
	}
	if pt.Critic != nil {
		c := *pt.Critic
		pt.Critic = &c
	}
	if pt.Policy.LoRA != nil {
		l := *pt.Policy.LoRA
		pt.Policy.LoRA = &l
	}
	return pt
}

// combineKnobs are the n-knob combinations of different groups.
func combineKnobs(ks []ptKnob, n int) []ptKnob {
	var out []ptKnob
	for _, idx := range combinationsOf(len(ks), n, func(i, j int) bool { return ks[i].group == ks[j].group }) {
		var c ptKnob
		var groups, changes, flags, costs []string
		var edits []func(*PostTraining)
		for _, i := range idx {
			k := ks[i]
			groups, changes, flags, costs = append(groups, k.group), append(changes, k.change), append(flags, k.flags), append(costs, k.cost)
			edits = append(edits, k.edit)
			c.price += k.price
			c.members = append(c.members, k.members...)
		}
		c.group, c.change, c.flags, c.cost = strings.Join(groups, "+"), strings.Join(changes, " + "), strings.Join(flags, " "), strings.Join(costs, "; ")
		c.edit = func(p *PostTraining) {
			for _, e := range edits {
				e(p)
			}
		}
		out = append(out, c)
	}
	return out
}

// ptKnobs are the changes r's framework has a setting for, in its words
// (TRL's GRPOConfig flags, verl's Hydra overrides, OpenRLHF's
// train_ppo_ray flags, Unsloth's GRPOConfig and from_pretrained).
func ptKnobs(r PostTraining) []ptKnob {
	fw := r.Framework
	say := func(words map[string]string) string { return words[fw] }
	var ks []ptKnob
	add := func(group, change, flags, cost string, price int, edit func(*PostTraining)) {
		if flags != "" {
			ks = append(ks, ptKnob{group, change, flags, cost, price, []string{change}, edit})
		}
	}
	t := r.Policy
	if t.Checkpointing != CheckpointFull {
		add("checkpointing", "full activation checkpointing of the policy", say(map[string]string{
			"trl": "--gradient_checkpointing true", "verl": "actor_rollout_ref.model.enable_gradient_checkpointing=True",
			"openrlhf": "--actor.gradient_checkpointing_enable", "unsloth": `use_gradient_checkpointing="unsloth"`}),
			"one more forward pass per training step", 4, func(p *PostTraining) { p.Policy.Checkpointing = CheckpointFull })
	}
	if mb := t.MicroBatch; mb > 1 {
		n, acc := mb/2, max(1, t.GradAccum)*2
		add("micro_batch", fmt.Sprintf("policy micro-batch %d (accumulating twice as many)", n), say(map[string]string{
			"trl":      fmt.Sprintf("--per_device_train_batch_size %d --gradient_accumulation_steps %d", n, acc),
			"verl":     fmt.Sprintf("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=%d", n),
			"openrlhf": fmt.Sprintf("--train.micro_batch_size %d", n), "unsloth": fmt.Sprintf("per_device_train_batch_size=%d, gradient_accumulation_steps=%d", n, acc)}),
			"more micro-steps per update", 3, func(p *PostTraining) {
				p.Policy.MicroBatch, p.Policy.GradAccum = n, acc
			})
	}
	if n := r.LogProbMicroBatch; n > 1 && fw == "verl" {
		add("log_prob", fmt.Sprintf("log-prob micro-batch %d", n/2), fmt.Sprintf("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=%d actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=%d", n/2, n/2),
			"more passes for the log-probabilities", 2, func(p *PostTraining) { p.LogProbMicroBatch = n / 2 })
	}
	if t.Trainable != "lora" && t.LoRA == nil {
		add("trainable", "LoRA on the policy (rank 16 on attention and MLP)", say(map[string]string{
			"trl": "--use_peft --lora_r 16 --lora_target_modules all-linear", "verl": "actor_rollout_ref.model.lora_rank=16 actor_rollout_ref.model.target_modules=all-linear"}),
			"trains adapters only: a lower quality ceiling", 7, func(p *PostTraining) {
				p.Policy.LoRA, p.Policy.Trainable = &LoRA{Rank: 16, Targets: []string{"all_linear"}}, "lora"
			})
	}
	if t.Optimizer == "" || t.Optimizer == "adamw" {
		add("optimizer", "8-bit AdamW states for the policy", say(map[string]string{"trl": "--optim adamw_bnb_8bit"}),
			"blockwise-quantized moments: small accuracy risk", 3, func(p *PostTraining) { p.Policy.Optimizer = "adamw_8bit" })
	}
	if fw == "verl" && !r.ParamOffload {
		add("param_offload", "the policy's parameters to host memory between uses", "actor_rollout_ref.actor.fsdp_config.param_offload=True",
			"copies every step", 6, func(p *PostTraining) { p.ParamOffload = true })
	}
	if fw == "verl" && !r.OptimizerOffload {
		add("optimizer_offload", "the policy's optimizer states to host memory between uses", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
			"copies every step", 5, func(p *PostTraining) { p.OptimizerOffload = true })
	}
	if ro := r.Rollout; ro != nil && (ro.Engine == "vllm" || ro.Engine == "sglang") && ro.Placement != "separate" {
		ptEngineKnobs(fw, *ro, add)
	}
	if n := r.CompletionLen; n >= 256 {
		add("completion", fmt.Sprintf("shorter completions (%d tokens)", n/2), say(map[string]string{
			"trl": fmt.Sprintf("--max_completion_length %d", n/2), "verl": fmt.Sprintf("data.max_response_length=%d", n/2),
			"unsloth": fmt.Sprintf("max_completion_length=%d", n/2)}),
			"less room to reason: a different task", 10, func(p *PostTraining) { p.CompletionLen = n / 2 })
	}
	return ks
}

// ptEngineKnobs are the colocated engine's share of the card (a smaller
// one leaves the trainer more; a larger one lets an engine start that
// holds too little) and its sleep.
func ptEngineKnobs(fw string, ro Rollout, add func(group, change, flags, cost string, price int, edit func(*PostTraining))) {
	util := map[string]string{"trl": "--vllm_gpu_memory_utilization %.2f", "verl": "actor_rollout_ref.rollout.gpu_memory_utilization=%.2f",
		"openrlhf": "--vllm.gpu_memory_utilization %.2f", "unsloth": "gpu_memory_utilization=%.2f in FastLanguageModel.from_pretrained"}[fw]
	for _, f := range []float64{0.6, 0.8, 1.25, 1.5, 2} {
		u := math.Round(ro.GPUMemoryUtilization*f*100) / 100
		if u <= 0.05 || u > 0.95 || util == "" {
			continue
		}
		cost := "a smaller KV cache: fewer sequences generated at once"
		if f > 1 {
			cost = "less of the card left to the trainer"
		}
		add("util", fmt.Sprintf("the rollout engine's share of the card %.2f (from %.2f)", u, ro.GPUMemoryUtilization), fmt.Sprintf(util, u), cost, 3,
			func(p *PostTraining) { p.Rollout.GPUMemoryUtilization = u })
	}
	if ro.Engine == "vllm" && ro.Sleep == SleepNone && (fw == "trl" || fw == "openrlhf") {
		flag := map[string]string{"trl": "--vllm_enable_sleep_mode true", "openrlhf": "--vllm.enable_sleep"}[fw]
		level := map[string]string{"trl": SleepLevel2, "openrlhf": SleepLevel1}[fw]
		add("sleep", "the engine sleeps outside generation", flag, "weights reloaded (or copied back) every step", 2,
			func(p *PostTraining) { p.Rollout.Sleep = level })
	}
}
