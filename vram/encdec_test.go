package vram

import (
	"strings"
	"testing"
)

// TestEncoderDecoder checks the encoder-decoder path end to end on
// Flan-T5: training estimates and replays with the bridge between the
// stacks, the decoder length, inference's two caches, and the rules.
func TestEncoderDecoder(t *testing.T) {
	m := MustPreset("flan-t5-base")
	plan := func(dec int) Training {
		return Training{Model: m, SeqLen: 512, DecoderSeqLen: dec, MicroBatch: 8, Precision: "amp_bf16", Optimizer: "adamw"}
	}
	long, short := plan(512), plan(32)
	el, err := long.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	es, err := short.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if es.Static.Activations >= el.Static.Activations {
		t.Errorf("a 32-token decoder keeps %v of activations, a 512-token one %v", es.Static.Activations, el.Static.Activations)
	}
	if len(el.Notes) != 1 || !strings.Contains(el.Notes[0], "eager") {
		t.Errorf("T5 has eager attention only; notes %q", el.Notes)
	}
	tl, err := long.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	var bridge int
	for _, e := range tl.Events {
		if strings.Contains(e.Where(), "encoder-decoder bridge") {
			bridge++
		}
	}
	if bridge != 4 { // forward and backward, two iterations
		t.Errorf("%d bridge events, want 4", bridge)
	}
	rp, err := long.Replay(ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := float64(rp.PeakAllocated-el.Peak.Total()) / float64(el.Peak.Total()); d > 0.02 || d < -0.02 {
		t.Errorf("replay peak %v, timeline %v", rp.PeakAllocated, el.Peak.Total())
	}

	in := Inference{Model: m, Batch: 4, PromptTokens: 512, NewTokens: 64, Weights: Quant{DType: BF16}}
	ie, err := in.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	per := BF16.Size(int64(m.DecoderLayers) * 2 * int64(m.Heads*m.HeadDim))
	if ie.KVPerToken != per || ie.KVCache != mulBytes(4*(512+64), per) {
		t.Errorf("KV per token %v (want %v), cache %v (want the decoder's 64 tokens and the cross-attention's 512)", ie.KVPerToken, per, ie.KVCache)
	}

	for _, c := range []struct {
		name string
		tr   Training
		want string
	}{
		{"decoder length on a decoder-only model", Training{Model: MustPreset("gpt2"), SeqLen: 128, DecoderSeqLen: 16, MicroBatch: 1}, "decoder_seq_len applies to encoder-decoder"},
		{"negative decoder length", Training{Model: m, SeqLen: 128, DecoderSeqLen: -1, MicroBatch: 1}, "decoder_seq_len must be"},
		{"no decoder", Training{Model: func() Model { x := m; x.DecoderLayers = 0; return x }(), SeqLen: 128, MicroBatch: 1}, "model.decoder_layers"},
		{"all decoder", Training{Model: func() Model { x := m; x.DecoderLayers = x.Layers; return x }(), SeqLen: 128, MicroBatch: 1}, "model.decoder_layers"},
		{"decoder layers on a decoder-only model", Training{Model: func() Model { x := MustPreset("gpt2"); x.DecoderLayers = 2; return x }(), SeqLen: 128, MicroBatch: 1}, "decoder_layers and relative_buckets describe encoder-decoder"},
	} {
		if err := c.tr.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
