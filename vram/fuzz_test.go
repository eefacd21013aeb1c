package vram

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/internal/hostile"
)

// FuzzParsePlan: no plan file may make the decoder or the estimator panic,
// and whatever decodes estimates to a breakdown whose total is its sum.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{
		`{"model": "gpt2", "train": {"seq_len": 128, "micro_batch": 2}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "bf16", "lora": {"rank": 8, "targets": ["q_proj"]}}}`,
		`{"model": "mixtral-8x7b", "inference": {"batch": 4, "prompt_tokens": 100, "new_tokens": 10, "weights": {"dtype": "nf4"}}}`,
		`{"model": {"family": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "vocab": 100}, "train": {"seq_len": 8, "micro_batch": 1, "parallel": {"tp": 2, "pp": 2, "dp": 2, "zero_stage": 3}}}`,
		`{"model": "gpt2", "train": {"seq_len": 1e9, "micro_batch": 1e9}}`,
		`{"model": {"family": "mamba2", "layers": 2, "hidden": 64, "heads": 8, "head_dim": 16, "ffn": 128, "vocab": 100, "ssm": {"heads": 8, "head_dim": 16, "state": 8, "groups": 2, "chunk": 16}}, "train": {"seq_len": 40, "micro_batch": 2, "grad_checkpointing": "full"}}`,
		`{"model": "mamba-codestral-7b", "inference": {"batch": 2, "prompt_tokens": 100, "new_tokens": 10}}`,
		`{"model": {"family": "lfm2", "layers": 3, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 100, "short_conv": {"kernel": 3, "attention_layers": [1]}}, "train": {"seq_len": 16, "micro_batch": 2}}`,
		`{"model": {"family": "qwen3_next", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128, "vocab": 100, "rotary_pct": 0.25, "delta_net": {"key_heads": 2, "value_heads": 4, "key_dim": 8, "value_dim": 8, "conv_kernel": 4, "attention_layers": [1]}}, "train": {"seq_len": 70, "micro_batch": 1}}`,
		`{"model": {"family": "falcon_h1", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128, "vocab": 100, "ssm": {"heads": 4, "head_dim": 16, "state": 8, "chunk": 16, "parallel_attention": true, "norm": "none"}}, "inference": {"batch": 2, "prompt_tokens": 20, "new_tokens": 4}}`,
		`{"model": {"family": "smollm3", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 100, "no_rope_every": 2}, "train": {"seq_len": 16, "micro_batch": 1}}`,
		`{"model": "bert-base-uncased", "train": {"seq_len": 512, "micro_batch": 8, "attention": "eager", "grad_checkpointing": "full"}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 1, "precision": "bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 3, "deepspeed": {"reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": 5e7, "overlap_comm": false}}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 8, "precision": "bf16", "framework": "megatron", "grad_checkpointing": "full", "recompute_method": "uniform", "recompute_num_layers": 4, "parallel": {"tp": 2, "sp": true, "pp": 2, "pp_microbatches": 8, "pp_account_embedding": true, "pp_account_loss": true}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 8, "precision": "bf16", "float8": "tensorwise", "float8_all_gather": true, "parallel": {"dp": 4, "fsdp": "full_shard", "pp": 2, "pp_microbatches": 8, "pp_schedule": "zbv"}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 8, "precision": "bf16", "framework": "torchtitan", "compile": true, "grad_checkpointing": "op", "parallel": {"tp": 4, "async_tp": true, "dp": 2, "fsdp": "full_shard"}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 16, "precision": "bf16", "framework": "torchtitan", "parallel": {"pp": 4, "pp_schedule": "dualpipev", "pp_microbatches": 8, "dp": 2, "fsdp": "full_shard"}}}`,
		`{"model": "llama-2-7b", "train": {"seq_len": 1024, "micro_batch": 1, "grad_accum": 8, "precision": "bf16", "framework": "litgpt", "lora": {"rank": 8, "targets": ["q_proj", "v_proj"]}, "parallel": {"dp": 4, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": "shared", "no_sync": true}}}`,
		`{"model": "llama-2-7b", "train": {"seq_len": 1024, "micro_batch": 1, "grad_accum": 2, "precision": "bf16", "framework": "hf_trainer", "lora": {"rank": 8, "targets": ["all_linear"]}, "parallel": {"dp": 2, "fsdp": "full_shard", "fsdp_version": 1, "fsdp_adapter_units": "apart", "no_sync": false}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 8, "precision": "bf16", "parallel": {"pp": 2, "pp_microbatches": 4, "pp_schedule": "interleaved_zb", "virtual_stages": 2}}}`,
		`{"model": "llama-2-7b", "train": {"seq_len": 1024, "micro_batch": 1, "framework": "litgpt", "bitsandbytes": "0.41.1", "loss": "chunked_cross_entropy", "trainable": "lora", "lora": {"rank": 8, "targets": ["q_proj"]}, "quantized_base": "nf4", "quantized_modules": "all_linear"}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 8192, "micro_batch": 1, "precision": "fp32", "compute_dtype": "bf16", "framework": "torchtitan", "compile": true, "compile_loss": false, "alloc_conf": "expandable_segments:True,garbage_collection_threshold:0.6", "grad_checkpointing": "full", "parallel": {"dp": 2, "fsdp": "full_shard", "cp": 4, "pp": 2, "pp_microbatches": 4}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 4096, "micro_batch": 2, "precision": "bf16", "framework": "torchtune", "grad_checkpointing": "full", "activation_offloading": true, "parallel": {"dp": 4, "fsdp": "full_shard", "cpu_offload": "optimizer+params"}}}`,
		`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1, "precision": "mixed_bf16", "framework": "deepspeed", "parallel": {"dp": 8, "zero_stage": 3, "cpu_offload": "optimizer+params", "deepspeed": {"offload_optimizer_device": "nvme", "offload_param_device": "nvme", "sub_group_size": 1e8, "max_in_cpu": 2e9}}}}`,
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "grpo", "framework": "trl", "prompt_len": 128, "completion_len": 256, "policy": {"micro_batch": 2, "precision": "bf16", "lora": {"rank": 8, "targets": ["q_proj"]}, "trainable": "lora"}, "rollout": {"engine": "vllm", "sleep": "level2", "gpu_memory_utilization": 0.4}}}`,
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "grpo", "framework": "verl", "prompt_len": 128, "completion_len": 256, "log_prob_micro_batch": 4, "reference": "model", "param_offload": true, "policy": {"micro_batch": 2, "parallel": {"dp": 8}}, "rollout": {"engine": "sglang", "tensor_parallel_size": 2}}}`,
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "dpo", "framework": "trl", "prompt_len": 64, "completion_len": 64, "reference": "precomputed"}}`,
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "ppo", "framework": "openrlhf", "prompt_len": 64, "completion_len": 64, "optimizer_offload": true, "reward_model": "model", "policy": {"micro_batch": 2, "parallel": {"dp": 4, "zero_stage": 3}}, "rollout": {"engine": "vllm", "placement": "colocate", "tensor_parallel_size": 2, "sleep": "level1"}}}`,
		`{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "ppo", "framework": "verl", "prompt_len": 64, "completion_len": 64, "log_prob_micro_batch": 2, "packed_len": 32, "critic": {"micro_batch": 2, "param_offload": true}, "policy": {"micro_batch": 2, "parallel": {"dp": 2}}, "rollout": {"engine": "vllm", "tensor_parallel_size": 1}}}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range hostile.Seeds() { // the third audit's shapes (internal/hostile)
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		var p Plan
		var err error
		budget.Check(t, len(data), func() { p, err = ParsePlan(data, dir) })
		if err != nil {
			return
		}
		if p.Training != nil {
			est, err := p.Training.Estimate()
			if err != nil {
				t.Fatalf("valid plan failed to estimate: %v", err)
			}
			checkBreakdown(t, est.Peak)
		}
		if p.Inference != nil {
			est, err := p.Inference.Estimate()
			if err != nil {
				t.Fatalf("valid plan failed to estimate: %v", err)
			}
			checkBreakdown(t, est.Peak)
		}
		if p.PostTraining != nil {
			g, _ := LookupGPU("H100-80GB")
			est, err := p.PostTraining.Estimate(g)
			if err != nil {
				t.Fatalf("valid plan failed to estimate: %v", err)
			}
			for _, ph := range est.Phases {
				if ph.Allocated < 0 || ph.Reserved < ph.Allocated || ph.DeviceUsed < ph.Reserved || ph.Host < 0 {
					t.Fatalf("phase %+v", ph)
				}
			}
		}
	})
}

func checkBreakdown(t *testing.T, b Breakdown) {
	t.Helper()
	var sum Bytes
	for _, v := range b.values() {
		if v < 0 {
			t.Fatalf("negative category in %+v", b)
		}
		sum = addBytes(sum, v)
	}
	if sum != b.Total() {
		t.Fatalf("Total %d != sum %d", b.Total(), sum)
	}
}

// FuzzEstimateInvariants draws random valid plans and checks the estimator's
// invariants: the total is the sum of its parts; a larger micro-batch or a
// longer sequence never needs less memory; sharding over more GPUs never
// needs more per GPU for the sharded model states; and the step program's
// invariant pass (sanity.go) holds.
func FuzzEstimateInvariants(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint16(128), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add(uint8(5), uint8(3), uint16(1000), uint8(2), uint8(1), uint8(2), uint8(1), uint8(3))
	f.Add(uint8(9), uint8(2), uint16(64), uint8(4), uint8(3), uint8(1), uint8(2), uint8(1))
	f.Add(uint8(12), uint8(2), uint16(300), uint8(2), uint8(0), uint8(2), uint8(1), uint8(2)) // LLaVA, trained tower
	f.Add(uint8(13), uint8(3), uint16(200), uint8(1), uint8(0), uint8(0), uint8(0), uint8(1)) // Qwen2.5-VL, LoRA
	presetNames := []string{"gpt2", "bert-base-uncased", "pythia-160m", "opt-125m", "llama-3.2-1b", "qwen2.5-0.5b", "gemma-2b", "phi-1.5", "starcoderbase-1b", "tinyllama-1.1b", "vit-base-patch16-224", "opt-350m"}
	precisions := []string{"fp32", "bf16", "amp_bf16", "mixed_bf16", "fp16"}
	optimizers := []string{"adamw", "sgd", "sgd_momentum", "adafactor", "adamw_8bit", "lion"}
	ckpts := []Checkpointing{"none", "selective", "full", "op"}
	attns := []string{"sdpa", "eager"}
	models := make([]Model, 0, len(presetNames)+2)
	for _, n := range presetNames {
		models = append(models, MustPreset(n))
	}
	// Small vision-language models (examples/measure/trace-grid.json's).
	text := Model{Family: "llama", Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 688, Vocab: 1000, MaxPosition: 4096}
	llava, qwen := text, text
	llava.Vision = &Vision{Family: "llava", Tower: Model{Family: "clip_vision_model", Layers: 2, Hidden: 128, Heads: 4, FFN: 512,
		Image: &Image{Size: 64, Patch: 8, Channels: 3, ClassToken: true}}}
	qwen.Family = "qwen2"
	qwen.Vision = &Vision{Family: "qwen2_5_vl", Tower: Model{Family: "qwen2_5_vl_vision", Layers: 2, Hidden: 128, Heads: 4, FFN: 256, GlobalEvery: 2, AttentionChunk: 16,
		Image: &Image{Size: 140, Patch: 14, Channels: 3, TemporalPatch: 2, Merge: 2, Window: 56}}}
	models = append(models, llava, qwen)
	f.Fuzz(func(t *testing.T, mi, batch uint8, seq uint16, pi, oi, ci, ai, zi uint8) {
		m := models[int(mi)%len(models)]
		tr := Training{Model: m, MicroBatch: 1 + int(batch%8), SeqLen: 1 + int(seq%2048),
			Precision: precisions[int(pi)%len(precisions)], Optimizer: optimizers[int(oi)%len(optimizers)],
			Checkpointing: ckpts[int(ci)%len(ckpts)], Attention: attns[int(ai)%len(attns)]}
		if m.Family == "vit" {
			tr.SeqLen = m.Image.Tokens()
		}
		if m.Vision != nil {
			tr.SeqLen += m.Vision.ImageTokens()
			if zi%4 == 2 && zi%2 == 0 {
				tr.VisionTower = "trainable"
			}
		}
		if zi%2 == 1 {
			tr.LoRA = &LoRA{Rank: 4, Targets: []string{"q_proj", "v_proj"}}
		}
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%+v: %v", tr, err)
		}
		checkBreakdown(t, est.Peak)
		if err := tr.checkStep(); err != nil {
			t.Fatal(err)
		}
		if tl, _ := tr.Timeline(); tl.PeakEvent().Live.Total() != est.Peak.Total() {
			t.Fatalf("estimate peak %v, recorded timeline %v", est.Peak.Total(), tl.PeakEvent().Live.Total())
		}
		rep, err := tr.Replay(ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.PeakReserved < rep.PeakAllocated || rep.PeakAllocated <= 0 {
			t.Fatalf("replay: reserved %v < allocated %v", rep.PeakReserved, rep.PeakAllocated)
		}
		checkBound(t, tr.ThroughputBound, true)
		bigger := tr
		bigger.MicroBatch++
		if e2, _ := bigger.Estimate(); e2.Peak.Total() < est.Peak.Total() {
			t.Fatalf("micro_batch %d → %d lowers the peak: %v → %v", tr.MicroBatch, bigger.MicroBatch, est.Peak.Total(), e2.Peak.Total())
		}
		if m.Family != "vit" {
			longer := tr
			longer.SeqLen += 64
			if e2, _ := longer.Estimate(); e2.Peak.Total() < est.Peak.Total() {
				t.Fatalf("seq_len %d → %d lowers the peak: %v → %v", tr.SeqLen, longer.SeqLen, est.Peak.Total(), e2.Peak.Total())
			}
		}
		stage := int(zi % 4)
		prev := MaxBytes
		for _, dp := range []int{1, 2, 4} {
			s := tr
			s.Parallel = Parallel{DP: dp, ZeRO: stage}
			ms, err := s.ModelStates()
			if err != nil {
				t.Fatal(err)
			}
			if ms.Total() > prev {
				t.Fatalf("ZeRO-%d dp=%d: model states %v > %v", stage, dp, ms.Total(), prev)
			}
			prev = ms.Total()
		}
	})
}

// FuzzReadCheckpoint: a checkpoint folder holding whatever index and shard
// headers the fuzzer makes (an index may name itself, the folder, a parent,
// a folder loop, a shard or nothing) never panics, recurses or hangs, and
// what it reads has non-negative sizes that add up to the shards' data.
func FuzzReadCheckpoint(f *testing.F) {
	shard := header(`{"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}`)
	for _, idx := range []string{
		`{"weight_map": {"w": "a.safetensors"}}`,
		`{"weight_map": {"w": "model.safetensors.index.json"}}`,
		`{"weight_map": {"w": "."}}`,
		`{"weight_map": {"w": "loop/loop/a.safetensors"}}`,
		`{"weight_map": {"w": "../a.safetensors", "v": "sub/a.safetensors"}}`,
		`{"weight_map": {}}`,
		`{"weight_map": {"w": "fifo.safetensors"}}`, // a FIFO in the folder
		`{"weight_map": {"w": "a.safetensors", "v": "fifo.safetensors"}}`,
	} {
		f.Add([]byte(idx), shard, uint8(0))
	}
	f.Add([]byte(`{}`), []byte{0, 0, 0, 0, 0, 0, 0, 0}, uint8(1))
	f.Fuzz(func(t *testing.T, index, head []byte, layout uint8) {
		dir := t.TempDir()
		_ = os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		_ = os.Symlink(".", filepath.Join(dir, "loop"))
		_ = os.Symlink(dir, filepath.Join(dir, "sub", "up"))
		_ = syscall.Mkfifo(filepath.Join(dir, "fifo.safetensors"), 0o644)
		if layout%2 == 0 {
			_ = os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644)
		}
		for _, name := range []string{"a.safetensors", "sub/a.safetensors", "model.safetensors"} {
			_ = os.WriteFile(filepath.Join(dir, name), head, 0o644)
		}
		var ts []Tensor
		var err error
		budget.Check(t, len(index)+3*len(head), func() { ts, err = ReadCheckpoint(dir) })
		if err != nil {
			return
		}
		var total Bytes
		for _, x := range ts {
			if x.Bytes < 0 || x.Numel() < 0 || x.Layer < -1 {
				t.Fatalf("bad tensor %+v", x)
			}
			total = addBytes(total, x.Bytes)
		}
		if total > Bytes(len(head))*3 {
			t.Fatalf("tensors total %d bytes from shards of %d", total, len(head))
		}
	})
}

// FuzzFromHFConfig: no config.json makes the import panic; whatever imports
// is a valid model whose parameter count is positive, grows with layers,
// and whose training and inference estimates succeed and never shrink when
// the batch, the sequence or the layers grow.
func FuzzFromHFConfig(f *testing.F) {
	for _, name := range []string{"gpt2", "llama-2-7b-hf", "mixtral-8x7b", "qwen2.5-7b", "bert-large-uncased", "meta-llama-3-8b", "llava-1.5-7b-hf", "qwen2.5-vl-7b-instruct",
		"whisper-large-v3", "qwen3-vl-8b-instruct", "qwen3-vl-30b-a3b-instruct"} {
		b, err := os.ReadFile(filepath.Join("testdata", "hf", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model_type": "llama", "num_hidden_layers": 1e9, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 1, "vocab_size": 8}`))
	f.Add([]byte(`{"model_type": "vit", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 64, "image_size": 4294967296, "patch_size": 1}`))
	// Values of the wrong JSON type and task classes (the second audit).
	f.Add([]byte(`{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "tie_word_embeddings": "true", "torch_dtype": "float128"}`))
	f.Add([]byte(`{"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "a"}, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}`))
	f.Add([]byte(`{"model_type": "gemma2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "head_dim": 16, "layer_types": [1, "x"], "attn_logit_softcapping": "50"}`))
	// The 2025–26 families' own keys.
	f.Add([]byte(`{"model_type": "gemma3n_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "activation_sparsity_pattern": [0.95, "x", null, [0.5]]}`))
	f.Add([]byte(`{"model_type": "gemma3n_text", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "activation_sparsity_pattern": [1e308, -1]}`))
	f.Add([]byte(`{"model_type": "minimax_m3_vl_text", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "layer_types": ["full_attention", "minimax_m3_sparse"], "index_n_heads": 2, "index_head_dim": 16, "index_block_size": 1e30, "index_topk_blocks": -3}`))
	f.Add([]byte(`{"model_type": "kimi_linear", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "linear_attn_config": {"kda_layers": [1, 1, 1e12], "full_attn_layers": [[2]]}}`))
	f.Add([]byte(`{"model_type": "smollm3", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "no_rope_layers": [1, 1, 1, 0]}`))
	f.Add([]byte(`{"model_type": "exaone4", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "sliding_window": 16, "sliding_window_pattern": "LLLG"}`))
	f.Add([]byte(`{"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 32, "vocab_size": 100, "num_experts": [4, 4], "moe_topk": 2}`))
	f.Add([]byte(`{"model_type": "ernie4_5_moe", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "moe_num_experts": 4, "moe_k": 2, "moe_layer_start_index": 1}`))
	f.Add([]byte(`{"model_type": "deepseek_v2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "topk_method": "group_limited_greedy", "n_group": 2}`))
	f.Add([]byte(`{"model_type": "glm4_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "use_qk_norm": true}`))
	f.Add([]byte(`{"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100, "num_heads": 8, "head_dim": 16, "state_size": 8, "n_groups": 2, "chunk_size": 16}`))
	f.Add([]byte(`{"model_type": "bamba", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "mamba_n_heads": 8, "mamba_d_state": 16, "attn_layer_indices": [1, 3]}`))
	f.Add([]byte(`{"model_type": "granitemoehybrid", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 32, "shared_intermediate_size": 96, "vocab_size": 100, "num_local_experts": 4, "num_experts_per_tok": 2, "mamba_n_heads": 8, "mamba_d_state": 16, "layer_types": ["mamba", "attention", "mamba"]}`))
	f.Add([]byte(`{"model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "full_attention_interval": 2}`))
	f.Add([]byte(`{"model_type": "falcon_h1", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "mamba_n_heads": 4, "mamba_d_state": 16, "mamba_d_ssm": 96, "mamba_rms_norm": true, "mamba_d_head": "auto"}`))
	f.Add([]byte(`{"model_type": "lfm2", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "block_ff_dim": 192, "full_attn_idxs": [1, 3], "conv_L_cache": 3}`))
	f.Add([]byte(`{"model_type": "lfm2", "num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 100, "vocab_size": 100, "block_ffn_dim_multiplier": null, "layer_types": ["conv", "full_attention", "conv"]}`))
	// This stop's families: Jamba's Mamba-1 mixers, the released
	// vision-language models' towers and wrappers.
	f.Add([]byte(`{"model_type": "jamba", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "num_experts": 4, "mamba_dt_rank": "auto", "attn_layer_period": 4, "attn_layer_offset": 2}`))
	f.Add([]byte(`{"model_type": "llama4", "image_token_index": 99, "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32, "intermediate_size_mlp": 128, "vocab_size": 100, "num_local_experts": 2, "attention_chunk_size": 16}, "vision_config": {"model_type": "llama4_vision_model", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 128, "image_size": 32, "patch_size": 8, "projector_input_dim": 64, "projector_output_dim": 64, "vision_output_dim": 64}}`))
	f.Add([]byte(`{"model_type": "mistral3", "image_token_index": 99, "spatial_merge_size": 2, "text_config": {"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}, "vision_config": {"model_type": "pixtral", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "image_size": 32, "patch_size": 8, "hidden_act": "silu"}}`))
	f.Add([]byte(`{"model_type": "gemma3", "mm_tokens_per_image": 4, "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100}, "vision_config": {"model_type": "siglip_vision_model", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "image_size": 32, "patch_size": 8, "vision_use_head": false}}`))
	// Whisper's log-mel encoder-decoder and Qwen3-VL's deepstack tower.
	f.Add([]byte(`{"model_type": "whisper", "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "vocab_size": 100, "num_mel_bins": 8, "max_source_positions": 16, "max_target_positions": 8}`))
	f.Add([]byte(`{"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "rope_scaling": {"mrope_interleaved": true, "mrope_section": [4, 2, 2]}}, "vision_config": {"depth": 4, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "patch_size": 8, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 16, "deepstack_visual_indexes": [1, 2], "out_hidden_size": 64, "hidden_act": "gelu_pytorch_tanh"}}`))
	// Gemma 4 with its audio tower (the classes' defaults, and a small one).
	f.Add([]byte(`{"model_type": "gemma4", "vision_config": {}, "audio_config": {}}`))
	f.Add([]byte(`{"model_type": "gemma4", "text_config": {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_size_per_layer_input": 0}, "vision_config": {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8, "position_embedding_size": 64}, "audio_config": {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "subsampling_conv_channels": [16, 8], "conv_kernel_size": 3, "output_proj_dims": 40}}`))
	// Gemma 4's small releases: KV-shared layers and double-wide MLPs, with
	// wrong types and out-of-range values.
	f.Add([]byte(`{"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_kv_shared_layers": 3, "use_double_wide_mlp": true}`))
	f.Add([]byte(`{"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_kv_shared_layers": 1e18, "use_double_wide_mlp": "yes"}`))
	f.Add([]byte(`{"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_kv_shared_layers": -2, "use_double_wide_mlp": [true]}`))
	f.Add([]byte(`{"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_kv_shared_layers": 6, "num_experts": 4, "use_double_wide_mlp": true}`))
	// The 2026 families, each through its config class's defaults.
	for _, mt := range []string{"deepseek_v32", "glm_moe_dsa", "deepseek_v4", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "kimi_linear",
		"nemotron_h", "mimo_v2_flash", "minimax", "minimax_m3_vl", "gemma4", "gemma4_text", "mistral4", "exaone_moe", "olmo_hybrid", "lfm3", "gemma3n_text"} {
		f.Add([]byte(`{"model_type": "` + mt + `"}`))
	}
	for _, s := range hostile.Seeds() { // the third audit's shapes (internal/hostile)
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Model
		var err error
		budget.Check(t, len(data), func() { m, err = FromHFConfig(data) })
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("imported an invalid model: %v", err)
		}
		n := m.ParamCount()
		if n <= 0 {
			t.Fatalf("%d parameters", n)
		}
		seq, image := 64, 0
		if m.Image != nil {
			seq = m.Image.Tokens()
		}
		if m.Vision != nil {
			image = m.Vision.ImageTokens() // one image in each sequence
			seq += image
		}
		if m.SourcePositions > 0 {
			seq = 2 * m.SourcePositions // an audio encoder reads exactly its frames
		}
		tr := Training{Model: m, SeqLen: seq, MicroBatch: 1, Precision: "bf16"}
		est, err := tr.Estimate()
		if err != nil {
			if strings.Contains(err.Error(), "beyond") || strings.Contains(err.Error(), "does not divide") ||
				strings.Contains(err.Error(), "not modelled yet") {
				return // too big to train, a TP/FFN rule, or a serving-only family: a named refusal
			}
			t.Fatalf("estimate of an imported model: %v", err)
		}
		checkBreakdown(t, est.Peak)
		grow := func(name string, edit func(*Training)) {
			t2 := tr
			edit(&t2)
			e2, err := t2.Estimate()
			if err == nil && e2.Peak.Total() < est.Peak.Total() {
				t.Fatalf("%s lowers the peak: %v → %v", name, est.Peak.Total(), e2.Peak.Total())
			}
		}
		grow("micro_batch+1", func(t *Training) { t.MicroBatch++ })
		if m.Image == nil && m.SourcePositions == 0 {
			grow("seq_len×2", func(t *Training) { t.SeqLen *= 2 })
		}
		if m.Layers < maxLayers {
			grow("layers+1", func(t *Training) { t.Model.Layers++ })
			m2 := m
			m2.Layers++
			if m2.ParamCount() < n {
				t.Fatalf("one more layer has fewer parameters")
			}
		}
		if !m.Encoder() {
			in := Inference{Model: m, Batch: 1, PromptTokens: 32 + image, NewTokens: 8}
			if ie, err := in.Estimate(); err == nil {
				checkBreakdown(t, ie.Peak)
			}
		}
	})
}

// FuzzInferencePlan: inference plans with any sizes, huge ones included,
// estimate to exact, non-negative breakdowns or to an error naming a field;
// more sequences, a longer prompt or more generated tokens never need less.
func FuzzInferencePlan(f *testing.F) {
	oneGoroutineTable(f)
	f.Add(uint8(0), uint64(1), uint64(128), uint64(16), uint8(0), uint64(0), uint8(0), uint8(0))
	f.Add(uint8(3), uint64(8), uint64(4096), uint64(512), uint8(3), uint64(16), uint8(2), uint8(1))
	f.Add(uint8(5), uint64(1), uint64(8), uint64(1<<63-8), uint8(3), uint64(1<<63-1), uint8(1), uint8(2))
	f.Add(uint8(1), uint64(1<<40), uint64(1<<40), uint64(1), uint8(2), uint64(0), uint8(3), uint8(0))
	models := []string{"gpt2", "llama-3.2-1b", "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "deepseek-v3", "gemma-2b", "opt-125m", "starcoderbase-1b"}
	caches := []string{"dynamic", "legacy", "static", "paged"}
	weights := []DType{BF16, INT8, NF4, INT4, FP8E4M3}
	attns := []string{"sdpa", "eager", "flash2"}
	f.Fuzz(func(t *testing.T, mi uint8, batch, prompt, newTok uint64, ci uint8, page uint64, wi, ai uint8) {
		in := Inference{Model: MustPreset(models[int(mi)%len(models)]), Batch: int(batch >> 1), PromptTokens: int(prompt >> 1), NewTokens: int(newTok >> 1),
			Cache: caches[int(ci)%len(caches)], Weights: Quant{DType: weights[int(wi)%len(weights)]}, Attention: attns[int(ai)%len(attns)]}
		if in.Cache == "paged" {
			in.PageSize = int(page >> 1)
		}
		if in.Cache == "static" {
			in.KVCacheLen = in.PromptTokens + in.NewTokens
		}
		est, err := in.Estimate()
		if err != nil {
			var oe overflowError
			if errors.As(err, &oe) {
				t.Fatalf("overflow past validation: %v", err)
			}
			return
		}
		checkBreakdown(t, est.Peak)
		if est.Peak.Total() <= 0 || est.Peak.Total() > maxPlanBytes*4 {
			t.Fatalf("peak %d", est.Peak.Total())
		}
		grow := func(name string, edit func(*Inference)) {
			in2 := in
			edit(&in2)
			if in2.Cache == "static" {
				in2.KVCacheLen = in2.PromptTokens + in2.NewTokens
			}
			e2, err := in2.Estimate()
			if err == nil && e2.Peak.Total() < est.Peak.Total() {
				t.Fatalf("%s lowers the peak: %v → %v (%+v)", name, est.Peak.Total(), e2.Peak.Total(), in)
			}
		}
		checkBound(t, in.ThroughputBound, in.PromptTokens+in.NewTokens > 0)
		grow("batch+1", func(in *Inference) { in.Batch++ })
		grow("prompt+1", func(in *Inference) { in.PromptTokens++ })
		grow("new_tokens+1", func(in *Inference) { in.NewTokens++ })
	})
}

// checkBound: a plan that estimates has a finite throughput bound on every
// catalog GPU, positive when it processes tokens (loading only does not),
// limited by compute or bandwidth.
func checkBound(t *testing.T, bound func(GPU) (Throughput, error), work bool) {
	t.Helper()
	for _, g := range gpus {
		b, err := bound(g)
		if g.TFLOPS <= 0 {
			if err == nil || !strings.Contains(err.Error(), "no dense BF16 peak") && !strings.Contains(err.Error(), "none found in a cited source") {
				t.Fatalf("%s, with no peak published or found: %v", g.Name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
		if !ok(b.Seconds) || !ok(b.StepBytes) || b.StepFLOPs < 0 || (b.Limit != "compute" && b.Limit != "memory bandwidth") ||
			work != ok(b.TokensPerSecond) || (!work && b.TokensPerSecond != 0) {
			t.Fatalf("%s: bound %+v", g.Name, b)
		}
	}
}
