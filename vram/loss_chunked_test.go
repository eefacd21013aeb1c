package vram

import (
	"strings"
	"testing"
)

// TestChunkedHead: torchtitan's chunked head keeps no tensor of the
// vocabulary's size past its chunk; its forward peak is one chunk's
// logits (bf16), their fp32 upcast's log-softmax, the loss's gradient
// and the log-softmax's (fp32) at once, over the fp32 gradient buffer of
// the hidden states — so halving the chunk saves 14 bytes per token and
// vocabulary entry eager, 4 compiled (the bf16 logits and their
// gradient, with the chunk's input gradient made from them).
func TestChunkedHead(t *testing.T) {
	m := MustPreset("llama-3.2-1b")
	v, h, tokens := int64(m.Vocab), int64(m.Hidden), int64(8192)
	head := func(chunks int, compiled bool) BlockActivations {
		tr := Training{Model: m, SeqLen: int(tokens), MicroBatch: 1, Precision: "fp32", ComputeDType: BF16, Loss: "chunked_head",
			LossChunks: chunks, Framework: FrameworkTorchtitan, Compile: compiled, Parallel: Parallel{DP: 8, FSDP: "full_shard", FSDPVersion: 2}}
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		return buildEdges(&r).Head
	}
	for _, c := range []struct {
		compiled bool
		perEntry int64
	}{{false, 2 + 4 + 4 + 4}, {true, 2 + 2}} {
		a, b := head(8, c.compiled), head(16, c.compiled)
		want := Bytes((tokens/8 - tokens/16) * v * c.perEntry)
		if c.compiled {
			want += Bytes((tokens/8 - tokens/16) * h * 2) // the chunk's input gradient, made while both live
		}
		if d := a.ForwardPeak - b.ForwardPeak; d != want {
			t.Errorf("compiled %v: forward peak 8 chunks − 16 chunks = %v, want %v", c.compiled, d, want)
		}
		if a.Saved != b.Saved {
			t.Errorf("compiled %v: saved %v with 8 chunks, %v with 16: the chunks' tensors outlive them", c.compiled, a.Saved, b.Saved)
		}
		for _, tn := range a.Tensors {
			if tn.Saved && tn.Bytes > Bytes(tokens*h*4) {
				t.Errorf("compiled %v: %s (%v) is saved past the loss", c.compiled, tn.Name, tn.Bytes)
			}
		}
		if a.ForwardPeak < Bytes(tokens*h*4) {
			t.Errorf("compiled %v: forward peak %v leaves out the fp32 gradient buffer of the hidden states", c.compiled, a.ForwardPeak)
		}
	}
}

func TestLossChunksChecked(t *testing.T) {
	m := MustPreset("llama-3.2-1b")
	for _, c := range []struct {
		tr   Training
		want string
	}{
		{Training{Model: m, SeqLen: 1000, MicroBatch: 1, Loss: "chunked_head", LossChunks: 3}, "loss_chunks 3: ChunkedLossWrapper sequence length must be divisible by num_chunks (1000 tokens a micro-batch)"},
		{Training{Model: m, SeqLen: 1024, MicroBatch: 1, LossChunks: 4}, "loss_chunks 4: only loss chunked_head"},
		{Training{Model: MustPreset("flan-t5-base"), SeqLen: 512, MicroBatch: 1, Loss: "chunked_head"}, "loss chunked_head: torchtitan's chunked head runs a decoder's output projection"},
	} {
		if err := c.tr.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.tr.Loss, err, c.want)
		}
	}
}
