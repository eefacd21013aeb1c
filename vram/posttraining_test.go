package vram

import (
	"strings"
	"testing"
)

func grpoTRL() PostTraining {
	return PostTraining{Algorithm: "grpo", Framework: "trl", PromptLen: 256, CompletionLen: 512,
		Policy:  Training{Model: MustPreset("qwen2.5-0.5b"), MicroBatch: 4, Precision: "bf16", Optimizer: "adamw"},
		Rollout: &Rollout{Engine: "vllm"}}
}

func ppoOpenRLHF() PostTraining {
	return PostTraining{Algorithm: "ppo", Framework: "openrlhf", PromptLen: 256, CompletionLen: 512, OptimizerOffload: true,
		Policy:  Training{Model: MustPreset("qwen2.5-0.5b"), MicroBatch: 4, Parallel: Parallel{DP: 8, ZeRO: 3}},
		Rollout: &Rollout{Engine: "vllm", Placement: "colocate", TP: 2, Sleep: SleepLevel1, GPUMemoryUtilization: 0.5}}
}

func grpoVerl() PostTraining {
	return PostTraining{Algorithm: "grpo", Framework: "verl", PromptLen: 256, CompletionLen: 512, LogProbMicroBatch: 8, Reference: "model",
		Policy:  Training{Model: MustPreset("qwen2.5-0.5b"), MicroBatch: 4, Optimizer: "adamw", Parallel: Parallel{DP: 8}},
		Rollout: &Rollout{Engine: "vllm", TP: 1}}
}

// TestPostTrainingRefusals: every combination a framework refuses is an
// error in its words, and every bad field is named.
func TestPostTrainingRefusals(t *testing.T) {
	cases := []struct {
		name string
		base func() PostTraining
		edit func(*PostTraining)
		want string
	}{
		{"unknown algorithm", grpoTRL, func(p *PostTraining) { p.Algorithm = "grp" }, "unknown post_training.algorithm"},
		{"unknown framework", grpoTRL, func(p *PostTraining) { p.Framework = "trlx" }, "unknown post_training.framework"},
		{"no rollout", grpoTRL, func(p *PostTraining) { p.Rollout = nil }, "post_training.rollout: grpo generates"},
		{"dpo with rollout", grpoTRL, func(p *PostTraining) { p.Algorithm = "dpo" }, "DPO trains on preference pairs"},
		{"seq_len given", grpoTRL, func(p *PostTraining) { p.Policy.SeqLen = 100 }, "post_training.policy.seq_len"},
		{"prompt_len", grpoTRL, func(p *PostTraining) { p.PromptLen = 0 }, "post_training.prompt_len must be in"},
		{"completion_len", grpoTRL, func(p *PostTraining) { p.CompletionLen = -1 }, "post_training.completion_len must be in"},
		{"utilization", grpoTRL, func(p *PostTraining) { p.Rollout.GPUMemoryUtilization = 1.5 }, "gpu_memory_utilization must be in"},
		{"sleep", grpoTRL, func(p *PostTraining) { p.Rollout.Sleep = "deep" }, "unknown post_training.rollout.sleep"},
		{"engine", grpoTRL, func(p *PostTraining) { p.Rollout.Engine = "tgi" }, "unknown post_training.rollout.engine"},
		{"generate with settings", grpoTRL, func(p *PostTraining) { p.Rollout = &Rollout{Engine: "generate", TP: 2} }, "takes no engine settings"},
		{"reference", grpoTRL, func(p *PostTraining) { p.Reference = "frozen" }, "unknown post_training.reference"},
		{"placement", grpoTRL, func(p *PostTraining) { p.Rollout.Placement = "remote" }, "unknown post_training.rollout.placement"},
		{"generate elsewhere", grpoTRL, func(p *PostTraining) { p.Rollout = &Rollout{Engine: "generate", Placement: "separate"} }, "runs inside the trainer"},
		{"verl separate", grpoVerl, func(p *PostTraining) { p.Rollout.Placement = "separate" }, "colocates the rollout"},
		{"adapter without LoRA", grpoTRL, func(p *PostTraining) { p.Reference = "adapter" }, `"adapter" disables the policy's LoRA adapter`},
		{"precomputed online", grpoTRL, func(p *PostTraining) { p.Reference = "precomputed" }, "precompute_ref_log_probs"},
		{"trl ppo", grpoTRL, func(p *PostTraining) { p.Algorithm = "ppo" }, "trl.experimental.ppo"},
		{"trl one generation", grpoTRL, func(p *PostTraining) { p.Generations = 1 }, "num_generations) must be at least 2"},
		{"trl sglang", grpoTRL, func(p *PostTraining) { p.Rollout.Engine = "sglang" }, "TRL generates with vLLM"},
		{"trl level1", grpoTRL, func(p *PostTraining) { p.Rollout.Sleep = SleepLevel1 }, "at level 2"},
		{"trl tp", grpoTRL, func(p *PostTraining) { p.Rollout.TP = 2 }, "must divide the world size"},
		{"trl verl settings", grpoTRL, func(p *PostTraining) { p.ParamOffload = true }, "verl's settings"},
		{"trl log-prob batch online", grpoTRL, func(p *PostTraining) { p.LogProbMicroBatch = 8 }, "precompute_ref_batch_size"},
		{"verl micro batch", grpoVerl, func(p *PostTraining) { p.Policy.MicroBatch = 0 }, "ppo_micro_batch_size_per_gpu"},
		{"verl log-prob micro batch", grpoVerl, func(p *PostTraining) { p.LogProbMicroBatch = 0 }, "log_prob_micro_batch_size_per_gpu"},
		{"verl generate", grpoVerl, func(p *PostTraining) { p.Rollout = &Rollout{Engine: "generate"} }, "vllm or sglang"},
		{"verl level1", grpoVerl, func(p *PostTraining) { p.Rollout.Sleep = SleepLevel1 }, "level 2"},
		{"verl deepspeed", grpoVerl, func(p *PostTraining) { p.Policy.Parallel.ZeRO = 3 }, "not DeepSpeed"},
		{"verl ppo without a critic", grpoVerl, func(p *PostTraining) { p.Algorithm = "ppo" }, "critic.micro_batch: PPO's critic"},
		{"verl grpo with a critic", grpoVerl, func(p *PostTraining) { p.Critic = &Critic{MicroBatch: 4} }, "only GAE (ppo) trains a critic"},
		{"verl critic micro batch", grpoVerl, func(p *PostTraining) { p.Algorithm, p.Critic = "ppo", &Critic{} }, "critic.micro_batch must be in"},
		{"verl dpo", grpoVerl, func(p *PostTraining) { p.Algorithm, p.Rollout = "dpo", nil }, "plan DPO with TRL"},
		{"openrlhf level2", ppoOpenRLHF, func(p *PostTraining) { p.Rollout.Sleep = SleepLevel2 }, "sleep at level 1"},
		{"openrlhf param offload", ppoOpenRLHF, func(p *PostTraining) { p.ParamOffload = true }, "keeps the bf16 weights on the GPU"},
		{"openrlhf sleep without zero-3", ppoOpenRLHF, func(p *PostTraining) { p.Policy.Parallel.ZeRO = 2 }, "needs ZeRO-3"},
		{"openrlhf grpo one sample", ppoOpenRLHF, func(p *PostTraining) { p.Algorithm = "grpo" }, "must be above 1 for a group estimator"},
		{"openrlhf colocate tp", ppoOpenRLHF, func(p *PostTraining) { p.Rollout.TP = 3 }, "vllm.num_engines × vllm.tensor_parallel_size"},
		{"openrlhf fsdp", ppoOpenRLHF, func(p *PostTraining) { p.Policy.Parallel = Parallel{DP: 8, FSDP: "full_shard"} }, "OpenRLHF trains with DeepSpeed"},
		{"openrlhf generate", ppoOpenRLHF, func(p *PostTraining) { p.Rollout = &Rollout{Engine: "generate"} }, "OpenRLHF generates with vLLM"},
		{"reward model elsewhere", grpoTRL, func(p *PostTraining) { p.RewardModel = "model" }, "planned with OpenRLHF"},
		{"policy field", grpoTRL, func(p *PostTraining) { p.Policy.Optimizer = "adamx" }, "post_training.policy: unknown optimizer"},
	}
	for _, c := range cases {
		p := c.base()
		c.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
		if _, err := p.Estimate(mustGPU("H100-80GB")); err == nil {
			t.Errorf("%s: Estimate accepted it", c.name)
		}
	}
}

// TestPostTrainingPhases: each framework's phases in its order, the
// device figure the sum of its parts, the bound the largest.
func TestPostTrainingPhases(t *testing.T) {
	g := mustGPU("H100-80GB")
	cases := []struct {
		name  string
		pt    func() PostTraining
		order []string
	}{
		{"trl grpo", grpoTRL, []string{"weight sync", "generation", "old log-probs", "training step"}},
		{"trl rloo", func() PostTraining { p := grpoTRL(); p.Algorithm = "rloo"; return p },
			[]string{"weight sync", "generation", "old log-probs", "reference log-probs", "training step"}},
		{"trl generate", func() PostTraining { p := grpoTRL(); p.Rollout = &Rollout{Engine: "generate"}; return p },
			[]string{"generation", "training step"}},
		{"trl dpo", func() PostTraining { p := grpoTRL(); p.Algorithm, p.Rollout = "dpo", nil; return p },
			[]string{"training step"}},
		{"trl dpo precomputed", func() PostTraining {
			p := grpoTRL()
			p.Algorithm, p.Rollout, p.Reference = "dpo", nil, "precomputed"
			return p
		}, []string{"precompute reference log-probs (before training)", "training step"}},
		{"trl vllm server", func() PostTraining { p := grpoTRL(); p.Rollout.Placement = "separate"; return p },
			[]string{"weight sync", "generation", "old log-probs", "training step"}},
		{"verl grpo", grpoVerl, []string{"generation", "old log-probs", "reference log-probs", "actor update", "weight sync"}},
		{"openrlhf hybrid", ppoOpenRLHF, []string{"generation", "old log-probs", "reference log-probs", "critic values", "critic update", "actor update", "weight sync"}},
		{"openrlhf separate", func() PostTraining {
			p := ppoOpenRLHF()
			p.Rollout = &Rollout{Engine: "vllm"}
			p.OptimizerOffload = false
			return p
		},
			[]string{"generation", "old log-probs", "actor update", "weight sync"}},
		{"verl ppo", func() PostTraining {
			p := grpoVerl()
			p.Algorithm, p.Reference, p.Critic = "ppo", "none", &Critic{MicroBatch: 4}
			return p
		}, []string{"generation", "old log-probs", "critic values", "critic update", "actor update", "weight sync"}},
	}
	for _, c := range cases {
		e, err := c.pt().Estimate(g)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var names []string
		var most Bytes
		for _, p := range e.Phases {
			names = append(names, p.Name)
			most = max(most, p.DeviceUsed)
			var parts Bytes
			for _, q := range p.Live {
				parts += q.Bytes
			}
			if parts != p.DeviceUsed || p.Reserved < p.Allocated || p.Allocated <= 0 {
				t.Errorf("%s %s: parts %v, device %v, allocated %v, reserved %v", c.name, p.Name, parts, p.DeviceUsed, p.Allocated, p.Reserved)
			}
		}
		if strings.Join(names, ", ") != strings.Join(c.order, ", ") {
			t.Errorf("%s: phases %q, want %q", c.name, names, c.order)
		}
		if !e.Starts || e.Peak().DeviceUsed != most || e.Peak().Name != e.Bound {
			t.Errorf("%s: starts %v (%s), bound %q, peak %+v", c.name, e.Starts, e.Err, e.Bound, e.Peak())
		}
	}
}

func phaseNamed(t *testing.T, e PostTrainingEstimate, name string) Phase {
	t.Helper()
	for _, p := range e.Phases {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no phase %q in %+v", name, e.Phases)
	return Phase{}
}

// TestPostTrainingMechanisms: what each setting changes, phase by phase.
func TestPostTrainingMechanisms(t *testing.T) {
	g := mustGPU("H100-80GB")
	est := func(p PostTraining) PostTrainingEstimate {
		t.Helper()
		e, err := p.Estimate(g)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	awake, asleep := grpoTRL(), grpoTRL()
	asleep.Rollout.Sleep = SleepLevel2
	a, s := est(awake), est(asleep)
	// Without sleep mode the engine keeps its weights and cache through
	// the training step; asleep it holds none of them, only its CUDA
	// graphs, and the cache is emptied before it wakes.
	if at, st := phaseNamed(t, a, "training step"), phaseNamed(t, s, "training step"); at.Engine != a.VLLM.Weights+a.VLLM.KVCache.Available+a.VLLM.CUDAGraphs || st.Engine != s.VLLM.CUDAGraphs || st.DeviceUsed >= at.DeviceUsed {
		t.Errorf("training step awake %+v, asleep %+v", at, st)
	}
	if ag, sg := phaseNamed(t, a, "generation"), phaseNamed(t, s, "generation"); sg.Reserved >= ag.Reserved {
		t.Errorf("generation reserved awake %v, asleep %v (empty_cache before the wake)", ag.Reserved, sg.Reserved)
	}
	// A reference model is a second copy of the policy's parameters in
	// every phase of the step.
	withRef := grpoTRL()
	withRef.Reference = "model"
	r := est(withRef)
	rt := phaseNamed(t, r, "training step")
	var ref Bytes
	for _, q := range rt.Live {
		if q.What == "reference model" {
			ref = q.Bytes
		}
	}
	if d := rt.Allocated - phaseNamed(t, a, "training step").Allocated; ref <= 0 || d != ref {
		t.Errorf("reference model %v adds %v to the training step", ref, d)
	}
	// verl's engine is a process of its own: a second CUDA context.
	v := est(grpoVerl())
	gen := phaseNamed(t, v, "generation")
	var ctx int
	for _, q := range gen.Live {
		if strings.Contains(q.What, "CUDA context") {
			ctx++
		}
	}
	if ctx != 2 {
		t.Errorf("verl generation: %d CUDA contexts in %+v", ctx, gen.Live)
	}
	// verl's offload moves the states to host memory between uses.
	off := grpoVerl()
	off.ParamOffload, off.OptimizerOffload = true, true
	o := est(off)
	og := phaseNamed(t, o, "generation")
	if og.Allocated >= gen.Allocated || og.Host <= gen.Host {
		t.Errorf("offload: generation allocated %v → %v, host %v → %v", gen.Allocated, og.Allocated, gen.Host, og.Host)
	}
}

// TestPostTrainingVLLMStart: colocated, vLLM 0.33's share must fit in
// what the trainer leaves free at its start (gpu_worker.py init_device);
// 0.34's extensible KV cache does not refuse it (v1/worker/utils.py:
// 783-797) and sizes its cache from that free memory instead.
func TestPostTrainingVLLMStart(t *testing.T) {
	p := grpoTRL()
	p.Policy.Model = MustPreset("qwen2.5-7b")
	p.Policy.Trainable, p.Policy.LoRA = "lora", &LoRA{Rank: 8, Targets: []string{"q_proj"}}
	p.Rollout.GPUMemoryUtilization = 0.9
	p.Rollout.Version = "0.33.0"
	e, err := p.Estimate(mustGPU("H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Starts || !strings.Contains(e.Err, "Free memory on device") {
		t.Errorf("starts %v: %s", e.Starts, e.Err)
	}
	v, err := Budget{GPU: mustGPU("H100-80GB"), Headroom: DefaultHeadroom}.JudgePostTraining(p)
	if err != nil || v.Fits || !strings.Contains(v.Why, "would not start") {
		t.Errorf("verdict %+v, %v", v, err)
	}
	p.Rollout.Version = "0.34.0"
	e34, err := p.Estimate(mustGPU("H100-80GB"))
	if err != nil {
		t.Fatal(err)
	}
	c := e34.VLLM
	if c == nil || !c.ExtensibleKVCache || strings.Contains(e34.Err, "Free memory on device") || c.KVCache.Available != c.measuredKV() || c.free >= mustGPU("H100-80GB").Total()-mustGPU("H100-80GB").Context {
		t.Errorf("0.34: %+v, %s", c, e34.Err)
	}
}

// TestMaxCompletionLen: the longest completion fits, one more does not.
func TestMaxCompletionLen(t *testing.T) {
	b := Budget{GPU: mustGPU("RTX-4090"), Headroom: DefaultHeadroom}
	p := grpoTRL()
	n, err := p.MaxCompletionLen(b)
	if err != nil || n < 1 {
		t.Fatalf("max completion %d, %v", n, err)
	}
	for _, c := range []struct {
		n    int
		fits bool
	}{{n, true}, {n + 1, false}} {
		q := p
		q.CompletionLen = c.n
		e, err := q.Estimate(b.GPU)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Starts && e.Peak().DeviceUsed <= b.Limit(); got != c.fits {
			t.Errorf("completion %d: fits %v, want %v (peak %v, limit %v)", c.n, got, c.fits, e.Peak().DeviceUsed, b.Limit())
		}
	}
}

// TestLogProbLossKeepsCompletion: the loss computes logits only for the
// completion (logits_to_keep), and in bf16 saves one log-softmax row per
// sequence: halving the completion saves B × C/2 × V × 2 bytes fewer.
func TestLogProbLossKeepsCompletion(t *testing.T) {
	saved := func(tokens int) Bytes {
		tr := Training{Model: MustPreset("qwen2.5-0.5b"), SeqLen: 1024, MicroBatch: 2, Precision: "bf16", Optimizer: "adamw",
			LogProbs: &LogProbLoss{Tokens: tokens}}
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		return buildEdges(&r).Head.Saved
	}
	v := int64(MustPreset("qwen2.5-0.5b").Vocab)
	if d, want := saved(512)-saved(256), BF16.Size(2*256*v); d != want {
		t.Errorf("saved difference %v, want %v", d, want)
	}
	bad := Training{Model: MustPreset("qwen2.5-0.5b"), SeqLen: 128, MicroBatch: 1, LogProbs: &LogProbLoss{Tokens: 200}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "log_probs.tokens must be in [0, 128]") {
		t.Errorf("err %v", err)
	}
}

// TestParsePostTrainingPlan: a plan's post_training section, and what it
// may not be combined with.
func TestParsePostTrainingPlan(t *testing.T) {
	good := `{"model": "qwen2.5-0.5b", "gpu": "H100-80GB", "post_training": {"algorithm": "grpo", "framework": "trl", "prompt_len": 128, "completion_len": 256,
		"policy": {"micro_batch": 2, "precision": "bf16"}, "rollout": {"engine": "vllm", "sleep": "level2"}}}`
	p, err := ParsePlan([]byte(good), "")
	if err != nil || p.PostTraining == nil || p.PostTraining.Policy.Model.Family != "qwen2" || p.Training != nil {
		t.Fatalf("plan %+v, %v", p, err)
	}
	if _, err := (Budget{GPU: mustGPU("H100-80GB")}).JudgePlan(p); err != nil {
		t.Error(err)
	}
	for _, c := range []struct{ plan, want string }{
		{`{"model": "qwen2.5-0.5b", "train": {"seq_len": 8, "micro_batch": 1}, "post_training": {}}`, `give it without "train" or "inference"`},
		{`{"model": "qwen2.5-0.5b", "post_training": {"model": "gpt2"}}`, "post_training.model: the policy is the plan's model"},
		{`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 8, "completion_len": 8, "rolout": {}}}`, "post_training.rolout"},
		{`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 8, "completion_len": 8, "policy": {"seq_len": 16}}}`, "post_training.policy.seq_len"},
		{`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 8, "completion_len": 8, "policy": {"micro_bach": 1}}}`, "post_training.policy.micro_bach"},
	} {
		_, err := ParsePlan([]byte(c.plan), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.plan, err, c.want)
		}
	}
}

// TestComparePostTraining: a comparison takes a post-training plan, judged
// on its largest phase.
func TestComparePostTraining(t *testing.T) {
	pt := grpoTRL()
	c, err := ComparePlans([]string{"grpo"}, []Plan{{PostTraining: &pt}}, []string{"H100-80GB", "RTX-4090"})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Plans[0]
	e, _ := pt.Estimate(mustGPU("H100-80GB"))
	if r.Err != "" || r.Kind != "post-training" || r.DeviceUsed[0] != e.Peak().DeviceUsed || !r.Fits[0] {
		t.Errorf("result %+v, peak %+v", r, e.Peak())
	}
}

// TestPackedLen: with the padding removed (verl's use_remove_padding) a
// micro-batch holds its sequences' real tokens: the training step and the
// no-grad passes shrink with the mean length, the engine's share does not.
func TestPackedLen(t *testing.T) {
	g := mustGPU("H100-80GB")
	full, packed := grpoVerl(), grpoVerl()
	packed.PackedLen = 192 // of 768
	f, err := full.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := packed.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old log-probs", "actor update"} {
		if a, b := phaseNamed(t, f, name).Allocated, phaseNamed(t, p, name).Allocated; b >= a {
			t.Errorf("%s: packed %v, full length %v", name, b, a)
		}
	}
	if f.VLLM.Requested != p.VLLM.Requested || f.VLLM.KVCache.MaxModelLen != p.VLLM.KVCache.MaxModelLen {
		t.Errorf("the engine's carve changed with packing")
	}
	step, err := packed.TrainingStep()
	if err != nil || step.MicroBatch != 1 || step.SeqLen != 4*192 || step.Attention != "flash2" {
		t.Errorf("packed step %d × %d (%s), %v", step.MicroBatch, step.SeqLen, step.Attention, err)
	}
	bad := grpoTRL()
	bad.PackedLen = 100
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "padding_free off") {
		t.Errorf("TRL packed: %v", err)
	}
	bad = grpoVerl()
	bad.PackedLen = 10000
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "post_training.packed_len must be in [0, 768]") {
		t.Errorf("too long: %v", err)
	}
}

// TestVerlCritic: PPO's critic keeps its parameters and optimizer states
// on the GPU in every phase unless its offload moves them out, trains in
// a phase of its own, and is the policy's backbone without the LM head.
func TestVerlCritic(t *testing.T) {
	g := mustGPU("H100-80GB")
	p := grpoVerl()
	p.Algorithm, p.Critic = "ppo", &Critic{MicroBatch: 4}
	e, err := p.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	gen := phaseNamed(t, e, "generation")
	has := func(ph Phase, what string) bool {
		for _, q := range ph.Live {
			if q.What == what {
				return true
			}
		}
		return false
	}
	if !has(gen, "critic parameters") || !has(gen, "critic optimizer states") || !has(phaseNamed(t, e, "actor update"), "critic optimizer states") {
		t.Errorf("the critic's states are not resident: %+v", gen.Live)
	}
	off := p
	off.Critic = &Critic{MicroBatch: 4, ParamOffload: true, OptimizerOffload: true}
	o, err := off.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	og := phaseNamed(t, o, "generation")
	if has(og, "critic parameters") || og.Host <= gen.Host || og.DeviceUsed >= gen.DeviceUsed {
		t.Errorf("critic offload: generation %+v", og)
	}
	big := p
	big.Policy.Model = MustPreset("qwen2.5-7b") // untied: the critic has no lm_head
	step := big.criticStep(4)
	m := big.Policy.Model
	if step.Model.Head != "none" || step.LogProbs != nil || m.ParamCount()-step.Model.ParamCount() != int64(m.Vocab)*int64(m.Hidden) {
		t.Errorf("critic step: head %q, %d parameters of the policy's %d", step.Model.Head, step.Model.ParamCount(), m.ParamCount())
	}
	// A preset stating its checkpoint's count (with the lm_head) still
	// makes a critic: the count is the policy's, not the critic's.
	stated := p
	stated.Policy.Model = MustPreset("llama-2-7b")
	if stated.Policy.Model.Params == 0 {
		t.Fatal("llama-2-7b states no parameter count")
	}
	if err := stated.criticStep(4).Validate(); err != nil {
		t.Errorf("critic of llama-2-7b: %v", err)
	}
}

// TestTRLPrecomputeBatch: DPO's precompute pass runs
// precompute_ref_batch_size pairs (log_prob_micro_batch), chosen and
// rejected rows together, its logits growing with them.
func TestTRLPrecomputeBatch(t *testing.T) {
	pass := func(batch int) Bytes {
		p := grpoTRL()
		p.Algorithm, p.Rollout, p.Reference, p.LogProbMicroBatch = "dpo", nil, "precomputed", batch
		g, _ := LookupGPU("H100-80GB")
		e, err := p.Estimate(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range phaseNamed(t, e, "precompute reference log-probs (before training)").Live {
			if part.Holder == HolderPass {
				return part.Bytes
			}
		}
		t.Fatal("no pass in the precompute phase")
		return 0
	}
	m := grpoTRL().Policy
	def, same, eight, sixteen := pass(0), pass(m.MicroBatch), pass(8), pass(16)
	if def != same {
		t.Errorf("unset %v, %d pairs %v: unset is the training batch", def, m.MicroBatch, same)
	}
	if sixteen <= eight {
		t.Errorf("16 pairs' pass %v, 8 pairs' %v: the pass grows with the batch", sixteen, eight)
	}
}

// TestOpenRLHFHybrid: colocated, every model is a process with its own
// CUDA context, the frozen models are bf16 ZeRO-3 shards, DeepSpeed's sleep
// keeps the weights and moves the rest to host memory, and vLLM's level-1
// sleep keeps its weights in host memory.
func TestOpenRLHFHybrid(t *testing.T) {
	g := mustGPU("H100-80GB")
	e, err := ppoOpenRLHF().Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	gen, old := phaseNamed(t, e, "generation"), phaseNamed(t, e, "old log-probs")
	var ctx Bytes
	for _, q := range gen.Live {
		if q.Holder == HolderRuntime && q.What != "NCCL buffers" {
			ctx += q.Bytes
		}
	}
	if want := 4 * g.Context; ctx != want { // actor, critic, reference and the engine
		t.Errorf("CUDA contexts %v, want %v", ctx, want)
	}
	m := MustPreset("qwen2.5-0.5b")
	if ref := old.By(HolderReference); ref != BF16.Size(m.ParamCount())/8 {
		t.Errorf("reference %v, want a bf16 ZeRO-3 shard", ref)
	}
	if old.Host-gen.Host != e.VLLM.Weights {
		t.Errorf("level 1: host %v → %v, vLLM weights %v", gen.Host, old.Host, e.VLLM.Weights)
	}
	awake := ppoOpenRLHF()
	awake.OptimizerOffload = false
	a, err := awake.Estimate(g)
	if err != nil {
		t.Fatal(err)
	}
	if ag := phaseNamed(t, a, "generation"); ag.Allocated <= gen.Allocated || ag.Host >= gen.Host {
		t.Errorf("ds.enable_sleep: generation %v/%v asleep, %v/%v awake", gen.Allocated, gen.Host, ag.Allocated, ag.Host)
	}
}

// TestPostTrainingTinyCard: on a card too small for the trainer alone the
// verdict says the engine would not start, with no negative size anywhere.
func TestPostTrainingTinyCard(t *testing.T) {
	g := GPU{Name: "tiny", Memory: KiB, Context: 500 * MiB}
	for _, p := range []PostTraining{grpoTRL(), ppoOpenRLHF(), grpoVerl()} {
		e, err := p.Estimate(g)
		if err != nil {
			t.Fatal(err)
		}
		if e.Starts || strings.Contains(e.Err, "(-") {
			t.Errorf("%s: starts %v: %s", p.Framework, e.Starts, e.Err)
		}
		for _, ph := range e.Phases {
			for _, q := range ph.Live {
				if q.Bytes < 0 {
					t.Errorf("%s %s: %s %v", p.Framework, ph.Name, q.What, q.Bytes)
				}
			}
		}
	}
}
