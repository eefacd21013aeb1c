package vram

import (
	"testing"
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
		`{"model": "bert-base-uncased", "train": {"seq_len": 512, "micro_batch": 8, "attention": "eager", "grad_checkpointing": "full"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data, t.TempDir())
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
// needs more per GPU for the sharded model states.
func FuzzEstimateInvariants(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint16(128), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add(uint8(5), uint8(3), uint16(1000), uint8(2), uint8(1), uint8(2), uint8(1), uint8(3))
	f.Add(uint8(9), uint8(2), uint16(64), uint8(4), uint8(3), uint8(1), uint8(2), uint8(1))
	presetNames := []string{"gpt2", "bert-base-uncased", "pythia-160m", "opt-125m", "llama-3.2-1b", "qwen2.5-0.5b", "gemma-2b", "phi-1.5", "starcoderbase-1b", "tinyllama-1.1b", "vit-base-patch16-224", "opt-350m"}
	precisions := []string{"fp32", "bf16", "amp_bf16", "mixed_bf16", "fp16"}
	optimizers := []string{"adamw", "sgd", "sgd_momentum", "adafactor", "adamw_8bit", "lion"}
	ckpts := []string{"none", "selective", "full"}
	attns := []string{"sdpa", "eager"}
	f.Fuzz(func(t *testing.T, mi, batch uint8, seq uint16, pi, oi, ci, ai, zi uint8) {
		m := MustPreset(presetNames[int(mi)%len(presetNames)])
		tr := Training{Model: m, MicroBatch: 1 + int(batch%8), SeqLen: 1 + int(seq%2048),
			Precision: precisions[int(pi)%len(precisions)], Optimizer: optimizers[int(oi)%len(optimizers)],
			Checkpointing: ckpts[int(ci)%len(ckpts)], Attention: attns[int(ai)%len(attns)]}
		if m.Family == "vit" {
			tr.SeqLen = m.Image.Tokens()
		}
		if zi%2 == 1 {
			tr.LoRA = &LoRA{Rank: 4, Targets: []string{"q_proj", "v_proj"}}
		}
		est, err := tr.Estimate()
		if err != nil {
			t.Fatalf("%+v: %v", tr, err)
		}
		checkBreakdown(t, est.Peak)
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
