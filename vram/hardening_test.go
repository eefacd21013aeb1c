package vram

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// Tests for the defects of the hardening audit, one per defect, by name.

func TestPlanTrailingDataRejected(t *testing.T) {
	for _, tail := range []string{`}]]]}}`, `]`, ` {"x": 1}`, ` 7`} {
		_, err := ParsePlan([]byte(`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1}}`+tail), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "after the JSON value") {
			t.Errorf("trailing %q: err = %v", tail, err)
		}
	}
	for _, in := range []string{`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1} }]`, `{"model": {"family": "llama", "layers": 1, "hidden": 8, "heads": 1, "ffn": 8, "vocab": 8}}}, "train": {"seq_len": 8, "micro_batch": 1}}`} {
		if _, err := ParsePlan([]byte(in), t.TempDir()); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

func TestPlanKeysAreCaseSensitive(t *testing.T) {
	for _, tc := range []struct{ plan, want string }{
		{`{"Model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1}}`, `Model: keys are case-sensitive; did you mean "model"?`},
		{`{"model": "gpt2", "train": {"SEQ_LEN": 8, "micro_batch": 1}}`, `train.SEQ_LEN: keys are case-sensitive; did you mean "seq_len"?`},
		{`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1, "parallel": {"TP": 1}}}`, `train.parallel.TP: keys are case-sensitive; did you mean "tp"?`},
		{`{"model": "llama-3-8b", "train": {"seq_len": 8, "micro_batch": 1, "lora": {"Rank": 8, "targets": ["q_proj"]}}}`, `train.lora.Rank`},
		{`{"model": {"Family": "llama"}, "train": {"seq_len": 8, "micro_batch": 1}}`, `model.Family: keys are case-sensitive`},
		{`{"model": {"hf_config": "c.json", "layers": 2}, "train": {"seq_len": 8, "micro_batch": 1}}`, `takes only "hf_config"`},
		{`{"model": "gpt2", "train": {"seq_len": 8, "micro_batch": 1, "model": "gpt2"}}`, `train.model: the model goes at the top level`},
	} {
		_, err := ParsePlan([]byte(tc.plan), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.plan, err, tc.want)
		}
	}
}

// TestOptionsThatDoNotApply: a setting the rest of the plan makes
// meaningless is an error that says why (LoRA settings with trainable
// "full" were once neither validated nor used).
func TestOptionsThatDoNotApply(t *testing.T) {
	base := func() Training { return Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 64, MicroBatch: 1} }
	lora := &LoRA{Rank: 8, Targets: []string{"q_proj"}}
	for _, tc := range []struct {
		name string
		edit func(*Training)
		want string
	}{
		{"lora with trainable full", func(t *Training) { t.Trainable, t.LoRA = "full", lora }, `lora is set but trainable is "full"`},
		{"lora with trainable frozen", func(t *Training) { t.Trainable, t.LoRA = "frozen", lora }, `lora is set but trainable is "frozen"`},
		{"quantized_modules without a quantized base", func(t *Training) { t.QuantizedModules = "all_linear" }, "quantized_modules applies to a quantized base"},
		{"custom_state_bytes without optimizer custom", func(t *Training) { t.CustomStateBytes = 4 }, `custom_state_bytes applies to optimizer "custom"`},
		{"optimizer_state_dtype for SGD", func(t *Training) { t.Optimizer, t.OptimizerStateDType = "sgd", BF16 }, `optimizer "sgd" keeps no state`},
		{"optimizer_impl without an optimizer", func(t *Training) { t.Optimizer, t.OptimizerImpl = "none", "fused" }, `optimizer is "none"`},
		{"checkpoint_every without checkpointing", func(t *Training) { t.CheckpointEvery = 2 }, `grad_checkpointing is "none"`},
		{"virtual_stages without interleaving", func(t *Training) { t.Parallel.PP, t.Parallel.VirtualStages = 2, 2 }, `virtual_stages applies to pp_schedule "interleaved_1f1b"`},
		{"pp_microbatches without pipeline", func(t *Training) { t.Parallel.PPMicrobatches = 4 }, "pp_microbatches applies to pipeline parallelism"},
	} {
		tr := base()
		tc.edit(&tr)
		if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	inf := func() Inference { return Inference{Model: MustPreset("llama-3.2-1b"), Batch: 1, PromptTokens: 8} }
	for _, tc := range []struct {
		name string
		edit func(*Inference)
		want string
	}{
		{"kv_cache_tokens without a static cache", func(in *Inference) { in.KVCacheLen = 64 }, `applies to cache "static", not "dynamic"`},
		{"page_size without a paged cache", func(in *Inference) { in.PageSize = 32 }, `page_size applies to cache "paged"`},
		{"device_capacity without a device map", func(in *Inference) { in.DeviceCapacity = GiB }, `device_capacity applies to device_map "sequential"`},
		{"quantized_modules for bf16 weights", func(in *Inference) { in.QuantizedModules = "all_linear" }, "quantized_modules applies to quantized weights"},
	} {
		in := inf()
		tc.edit(&in)
		if _, err := in.Estimate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	m := MustPreset("gpt2")
	m.Image = &Image{Size: 224, Patch: 16, Channels: 3}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.image applies to image models") {
		t.Errorf("image on a text model: %v", err)
	}
	m = MustPreset("gpt2")
	m.SharedExperts = 2
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "set experts too") {
		t.Errorf("shared_experts without experts: %v", err)
	}
}

// TestNoSilentOverflow: sizes that once wrapped around or saturated are
// either exact or an error naming the fields.
func TestNoSilentOverflow(t *testing.T) {
	t.Run("inference new_tokens near 2^63", func(t *testing.T) {
		_, err := Inference{Model: MustPreset("gpt2"), Batch: 1, PromptTokens: 8, NewTokens: 1<<63 - 8}.Estimate()
		if err == nil || !strings.Contains(err.Error(), "new_tokens must be in [0,") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("paged page_size near 2^63", func(t *testing.T) {
		_, err := Inference{Model: MustPreset("gpt2"), Batch: 1, PromptTokens: 8, Cache: "paged", PageSize: 1<<63 - 1}.Estimate()
		if err == nil || !strings.Contains(err.Error(), "page_size must be in [1,") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("inference message names inference fields", func(t *testing.T) {
		_, err := Inference{Model: MustPreset("gpt2"), Batch: 1 << 20, PromptTokens: 1 << 20}.Estimate()
		if err == nil || !strings.Contains(err.Error(), "batch × (prompt_tokens") || strings.Contains(err.Error(), "micro_batch") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("eager scores: doubling the batch never lowers the peak", func(t *testing.T) {
		var prev Bytes
		for b := 1; b <= 1<<14; b *= 2 {
			tr := Training{Model: MustPreset("gpt2"), SeqLen: 1 << 20, MicroBatch: b, Attention: "eager"}
			est, err := tr.Estimate()
			if err != nil {
				if !strings.Contains(err.Error(), `attention "eager": micro_batch × heads × seq_len × seq_len`) &&
					!strings.Contains(err.Error(), "micro_batch × seq_len") {
					t.Fatalf("batch %d: %v", b, err)
				}
				return
			}
			if p := est.Peak.Total(); p < prev || p >= MaxBytes/2 {
				t.Fatalf("batch %d: peak %d after %d", b, p, prev)
			}
			prev = est.Peak.Total()
		}
		t.Fatal("the eager score maps never hit the bound")
	})
	t.Run("vit image size is bounded", func(t *testing.T) {
		m := MustPreset("vit-base-patch16-224")
		small := m.ParamCount()
		m.Image.Size = 1 << 32
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.image: size") {
			t.Errorf("err = %v", err)
		}
		if n := m.ParamCount(); n != 0 && n < small {
			t.Errorf("2^32 px: %d parameters, fewer than at 224 px (%d)", n, small)
		}
	})
	t.Run("layers are bounded", func(t *testing.T) {
		m := MustPreset("gpt2")
		m.Layers = 1 << 20
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.layers = 1048576 is out of range") {
			t.Errorf("err = %v", err)
		}
		if n := len(m.Tensors()); n != 0 {
			t.Errorf("an out-of-range model listed %d tensors", n)
		}
	})
	t.Run("experts × layers is bounded", func(t *testing.T) {
		m := MustPreset("mixtral-8x7b")
		m.Layers, m.Experts = 1024, 4096
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "model.layers × (experts + shared_experts + 1)") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestPresetsAreCopies: changing a model taken from the catalog changes
// neither the catalog nor another copy, and the parameter count follows the
// change (the tensor cache is keyed by value).
func TestPresetsAreCopies(t *testing.T) {
	a := MustPreset("vit-base-patch16-224")
	before := a.ParamCount()
	a.Image.Size = 384
	if got := MustPreset("vit-base-patch16-224").Image.Size; got != 224 {
		t.Fatalf("the catalog's image size changed to %d", got)
	}
	if a.ParamCount() == before {
		t.Errorf("384 px has the parameter count of 224 px (%d): stale cache", before)
	}
	if b := MustPreset("vit-base-patch16-224"); b.ParamCount() != before {
		t.Errorf("a fresh copy has %d parameters, want %d", b.ParamCount(), before)
	}
}

// TestTensorCacheFollowsPointers: a model changed in place after its
// tensors were counted (which leaves the catalog's model as it was: a
// preset is a deep copy) — any number or switch behind any of its pointers
// (a hybrid's mixer, an image, a release, a vision tower's), through the
// pointer it shares with the model counted — is counted anew: the cached
// count equals one made with the cache emptied. The cache's key holds no
// pointer, so a pointer field added later cannot be compared by address.
func TestTensorCacheFollowsPointers(t *testing.T) {
	oneGoroutineTable(t)
	changed := 0
	smallest := map[string]string{} // one model a family, its smallest: its pointers are its family's
	for _, name := range Presets() {
		m := MustPreset(name)
		if s, ok := smallest[m.Family]; !ok || m.ParamCount() < MustPreset(s).ParamCount() {
			smallest[m.Family] = name
		}
	}
	for _, name := range smallest {
		m := MustPreset(name)
		if m.Experts > 8 { // fewer experts to count again and again
			m.Experts, m.ExpertsPerToken = 8, min(m.ExpertsPerToken, 8)
		}
		if m.ParamCount() == 0 {
			t.Fatalf("%s with 8 experts counts no parameters", name)
		}
		v := reflect.ValueOf(&m).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.Struct || v.Type().Field(i).Name == "Origin" {
				continue
			}
			eachLeaf(f.Elem(), name+"."+v.Type().Field(i).Name, func(path string, leaf reflect.Value) {
				if leaf.Kind() == reflect.String {
					return // names and formats: a bad one is an error, not a count
				}
				m.ParamCount() // cached under the model before the change
				old := reflect.ValueOf(leaf.Interface())
				bump(leaf)
				if fresh := MustPreset(name); reflect.DeepEqual(fresh.Vision, m.Vision) && reflect.DeepEqual(fresh.SSM, m.SSM) &&
					reflect.DeepEqual(fresh.ShortConv, m.ShortConv) && reflect.DeepEqual(fresh.DeltaNet, m.DeltaNet) &&
					reflect.DeepEqual(fresh.Mamba, m.Mamba) && reflect.DeepEqual(fresh.KDA, m.KDA) && reflect.DeepEqual(fresh.Compressed, m.Compressed) && reflect.DeepEqual(fresh.Lightning, m.Lightning) && reflect.DeepEqual(fresh.BlockSparse, m.BlockSparse) && reflect.DeepEqual(fresh.Image, m.Image) && reflect.DeepEqual(fresh.Release, m.Release) &&
					reflect.DeepEqual(fresh.Audio, m.Audio) && reflect.DeepEqual(fresh.Speech, m.Speech) {
					t.Errorf("%s changed in place changed the catalog's %s too: a preset shares a pointer with it", path, name)
				}
				cached := m.ParamCount()
				clearTensorCache()
				if fresh := m.ParamCount(); cached != fresh {
					t.Errorf("%s changed in place: %d parameters from the cache, %d counted anew", path, cached, fresh)
				}
				leaf.Set(old)
				changed++
			})
		}
	}
	if changed < 100 {
		t.Errorf("only %d fields behind pointers changed", changed)
	}
	var full Model
	fill(reflect.ValueOf(&full).Elem(), 0)
	for _, k := range []modelKey{full.key(), full.visionKey().tower} {
		kv := reflect.ValueOf(k.m)
		for i := 0; i < kv.NumField(); i++ {
			if f := kv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
				t.Errorf("the tensor cache's key keeps Model.%s as a pointer: compared by address, a change in place is missed", kv.Type().Field(i).Name)
			}
		}
	}
}

// TestTensorCacheLookupAllocatesNothing: counting a model's parameters
// again finds its tensors by comparing keys; for a text model without
// recurrent mixers that allocates nothing (a key whose parts escape to the
// heap would, on every estimate; Normalize copies a vision model's Vision).
func TestTensorCacheLookupAllocatesNothing(t *testing.T) {
	for _, name := range []string{"llama-3-8b", "deepseek-v3", "gpt-oss-20b"} {
		m := MustPreset(name)
		m.ParamCount()
		if n := testing.AllocsPerRun(20, func() { m.ParamCount() }); n != 0 {
			t.Errorf("%s: a repeated ParamCount makes %v allocations", name, n)
		}
	}
}

// TestPresetsConcurrentUse: goroutines taking, changing and estimating
// catalog models share nothing (go test -race checks it).
func TestPresetsConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := MustPreset("vit-base-patch16-224")
			m.Image.Size = 224 + 16*i
			tr := Training{Model: m, SeqLen: m.Image.Tokens(), MicroBatch: 1}
			if _, err := tr.Estimate(); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

// TestPlanFilesAreCapped: a plan or config that is a device, a FIFO, too big
// is refused before it is read; a path the user typed is read where it
// points.
func TestPlanFilesAreCapped(t *testing.T) {
	if _, err := ReadPlan("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("plan /dev/zero: %v", err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxPlanFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlan(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("oversized plan: %v", err)
	}
	// What the user typed is read where it points (absolute, ~/…, "..",
	// links): only the caps and the refusal of special files apply.
	cfg, _ := os.ReadFile("testdata/hf/gpt2.json")
	home := t.TempDir()
	t.Setenv("HOME", home)
	outside := filepath.Join(home, "config.json")
	if err := os.WriteFile(outside, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, outside)
	for _, ref := range []string{outside, "~/config.json", rel, "link.json"} {
		plan := `{"model": {"hf_config": "` + ref + `"}, "train": {"seq_len": 8, "micro_batch": 1}}`
		if p, err := ParsePlan([]byte(plan), dir); err != nil || p.Model.Family != "gpt2" {
			t.Errorf("hf_config %q: %v", ref, err)
		}
	}
	for ref, want := range map[string]string{"/dev/zero": "not a regular file", "/etc/hostname": "config.json", "missing.json": "no such file"} {
		plan := `{"model": {"hf_config": "` + ref + `"}, "train": {"seq_len": 8, "micro_batch": 1}}`
		if _, err := ParsePlan([]byte(plan), dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hf_config %q: err = %v, want %q", ref, err, want)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePlan([]byte(`{"model": {"hf_config": "sub/config.json"}, "train": {"seq_len": 8, "micro_batch": 1}}`), dir); err != nil {
		t.Errorf("a config beside the plan: %v", err)
	}
}

// TestGPUCapacityMessages: a capacity that is not a positive amount says
// so, instead of "unknown GPU".
func TestGPUCapacityMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-80 GiB", "must not be negative"},
		{"0", "must be more than 0 bytes"},
		{"0 GiB", "must be more than 0 bytes"},
		{"NaN GiB", "NaN is not a finite number"},
		{"inf GB", "inf is not a finite number"},
		{"80 GiBs", `unknown unit "GiBs"`},
		{"A200", `unknown GPU "A200"`},
		{"a100-80gb", ""},
		{"80 GiB", ""},
	} {
		_, err := ParseCapacity(tc.in)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestEntryPointsReturnOverflowAsError: should a count outgrow int64 despite
// validation, the public entry points return an error, not a panic.
func TestEntryPointsReturnOverflowAsError(t *testing.T) {
	err := func() (err error) {
		defer recoverOverflow(&err)
		_ = mulBytes(int64(MaxBytes), 2)
		return nil
	}()
	var oe overflowError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "please report") {
		t.Errorf("err = %v", err)
	}
}

// TestErrorsTeachTheFormat: a value of the wrong kind for a field that
// takes one of a list of words names the words; a key brought from a
// trainer's config names the plan's key.
func TestErrorsTeachTheFormat(t *testing.T) {
	for _, c := range []struct{ plan, want string }{
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "grad_checkpointing": true}}`, "train.grad_checkpointing: want one of the strings none, selective, full, op, memory_budget, got true or false"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "attention": 2}}`, "want one of the strings sdpa, flash2, flash3, memory_efficient, eager"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "optimizer": false}}`, "want one of the strings adamw, adam, sgd"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "precision": 16}}`, "want one of the strings fp32, tf32, amp_bf16"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "qlora": true}}`, `train.qlora: unknown field; the plan says it as quantized_base ({"dtype": "nf4", "double_quant": true}) with a lora`},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "gradient_accumulation_steps": 4}}`, "the plan says it as grad_accum"},
		{`{"model": "gpt2", "train": {"sequence_len": 128, "micro_batch": 1}}`, "the plan says it as seq_len"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "precision": "bf32"}}`, "unknown precision \"bf32\"; known: fp32, tf32, amp_bf16"},
		{`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 1, "parallel": {"fsdp": 1}}}`, "want one of the strings none, full_shard, shard_grad_op, hybrid"},
	} {
		p, err := ParsePlan([]byte(c.plan), "")
		if err == nil && p.Training != nil {
			_, err = p.Training.Estimate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.plan, err, c.want)
		}
	}
}
