package vram

import (
	"strings"
	"testing"
)

// qloraPlan is Llama-2-7B QLoRA (nf4 base, adapters on q_proj and v_proj)
// without checkpointing, so every block's saved tensors stay until backward.
func qloraPlan(framework Framework) Training {
	t := llamaPlan()
	t.Framework = framework
	t.Trainable = "lora"
	t.LoRA = &LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj", "v_proj"}}
	t.QuantizedBase = Quant{DType: NF4, GroupSize: 64}
	return t
}

// TestFourBitSavedInputs: bitsandbytes before 0.43.2 kept each 4-bit
// matmul's input for backward (MatMul4Bit ctx.tensors = (A, B), removed
// by #1270); from 0.43.2 on, and with torchao's NF4 (torchtune), a frozen
// linear saves nothing. The frozen linears whose input no one else saves are
// gate_proj and up_proj (the post-attention norm's output, hidden wide, one
// tensor for both) and down_proj (the gated product, ffn wide): b·s·(hidden
// + ffn) bf16 values per block. (o_proj's input is SDPA's output, which
// SDPA saves for its own backward; q_proj's is the adapters' input.)
func TestFourBitSavedInputs(t *testing.T) {
	saved := func(framework Framework, release string) Bytes {
		tr := qloraPlan(framework)
		tr.Bitsandbytes = release
		est, err := tr.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		return est.Block.Saved
	}
	m := MustPreset("llama-2-7b")
	want := BF16.Size(2048 * int64(m.Hidden+m.FFN))
	if d := saved("hf_trainer", "0.43.1") - saved("hf_trainer", "0.43.2"); d != want {
		t.Errorf("0.43.1 saves %v more per block than 0.43.2, want %v", d, want)
	}
	if a, b := saved("hf_trainer", ""), saved("hf_trainer", "0.43.2"); a != b {
		t.Errorf("pinned release %s saves %v, 0.43.2 %v; want the same", Bitsandbytes, a, b)
	}
	if a, b := saved("torchtune", ""), saved("hf_trainer", "0.43.2"); a != b {
		t.Errorf("torchtune (torchao NF4) saves %v, bitsandbytes 0.43.2 %v; want the same", a, b)
	}
}

// TestFourBitErrors: the release field is checked where it applies.
func TestFourBitErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Training)
		want string
	}{
		{func(t *Training) { t.QuantizedBase = Quant{}; t.Bitsandbytes = "0.41.1" }, "bitsandbytes applies to a 4-bit base"},
		{func(t *Training) { t.Framework = "torchtune"; t.Bitsandbytes = "0.41.1" }, "torchtune runs its 4-bit base with torchao"},
		{func(t *Training) { t.Bitsandbytes = "latest" }, `bitsandbytes "latest": want a release such as "` + Bitsandbytes + `"`},
		{func(t *Training) { t.Bitsandbytes = "0.43.2.1" }, "want a release such as"},
	} {
		tr := qloraPlan("hf_trainer")
		tc.edit(&tr)
		if _, err := tr.Estimate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Estimate() error = %v, want one containing %q", err, tc.want)
		}
	}
}

// TestFourBitDequantizedPerCall: a 4-bit lm_head is dequantized whole on
// every call, so a chunked loss (litgpt: 128-token chunks) pays the whole
// weight in each chunk's forward and backward, not a chunk's share of it.
// litgpt's layers were quantized from fp16 (Lightning's
// BitsandbytesPrecision), so a call holds the fp16 weight and its bf16 copy;
// transformers quantizes the bf16 weight, one copy.
func TestFourBitDequantizedPerCall(t *testing.T) {
	m := MustPreset("llama-2-7b")
	lmHead := int64(m.Vocab) * int64(m.Hidden)
	for _, tc := range []struct {
		framework Framework
		modules   string
		want      Bytes
	}{
		{"litgpt", "all_linear", BF16.Size(lmHead) + FP16.Size(lmHead)},
		{"hf_trainer", "all_linear", BF16.Size(lmHead)},
		{"litgpt", "all_linear_except_lm_head", 0},
	} {
		tr := qloraPlan(tc.framework)
		tr.QuantizedModules, tr.Loss = tc.modules, "chunked_cross_entropy"
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		hd := buildEdges(&r).Head
		var perCall Bytes
		for _, st := range hd.bwd {
			perCall = max(perCall, st.perCall)
		}
		if perCall != tc.want {
			t.Errorf("%s %s: lm_head rebuilds %v per call, want %v", tc.framework, tc.modules, perCall, tc.want)
		}
		// The last chunk's forward runs with the earlier chunks' saved
		// tensors; its backward with the input and every chunk's logits
		// gradient.
		chunks := Bytes(tr.SeqLen / 128)
		fwd := hd.Saved*(chunks-1)/chunks + tc.want
		bwd := BF16.Size(int64(tr.SeqLen)*int64(m.Hidden)) + BF16.Size(int64(tr.SeqLen)*int64(m.Vocab)) + tc.want
		if hd.ForwardPeak < fwd || hd.BackwardPeak < bwd {
			t.Errorf("%s %s: head peaks %v forward, %v backward; want at least %v and %v with the %v dequantized lm_head", tc.framework, tc.modules, hd.ForwardPeak, hd.BackwardPeak, fwd, bwd, tc.want)
		}
	}
}
