package vram

import "fmt"

// The per-token log-probabilities of post-training losses (GRPO, RLOO,
// DPO): the model computes logits only for the tokens the loss reads
// (transformers' logits_to_keep), scales them by the sampling temperature
// and takes each token's log-probability row by row — TRL's
// selective_log_softmax (trl/trainer/utils.py l.479-523, TRL 1.10.0):
//
//   - fp32 logits: torch.gather of the token's logit and a logsumexp per
//     row; logsumexp saves its input, so the whole scaled logits tensor is
//     held until backward;
//   - bf16/fp16 logits: F.log_softmax per row, no upcast; each row's
//     log_softmax output is saved for its backward.
//
// Under accelerate's native mixed precision (bf16 without DeepSpeed) the
// model's outputs are converted to fp32 (accelerate 1.15 accelerator.py
// l.1824-1835, operations.py convert_outputs_to_fp32), so a bf16-autocast
// policy's logits reach the loss as fp32.

// LogProbLoss describes the log-probability loss of a post-training step;
// Training.LogProbs set makes the step's loss this one.
type LogProbLoss struct {
	// Tokens is how many of each sequence's last tokens the loss reads:
	// GRPO's and RLOO's completion (TRL passes logits_to_keep = completion
	// + 1 and drops the last, grpo_trainer.py l.1499-1516); zero for DPO,
	// whose concatenated forward computes every position's logits
	// (dpo_trainer.py l.1340-1348).
	Tokens int `json:"tokens,omitempty"`
	// LogitsFP32 is accelerate's conversion of the outputs to fp32.
	LogitsFP32 bool `json:"logits_fp32,omitempty"`
	// TemperatureCopy: logits / temperature allocates a scaled copy
	// (TRL 1.10.0 grpo_trainer.py l.1532); false for an in-place div_.
	TemperatureCopy bool `json:"temperature_copy,omitempty"`
	// Fused: a cross-entropy kernel (flash-attn's cross_entropy_loss, as
	// verl's logprobs_from_logits uses) returns each token's
	// log-probability and keeps the logits and a per-token logsumexp,
	// with no log-softmax tensor.
	Fused bool `json:"fused,omitempty"`
	// HiddenChunks: the model returns its hidden states and the
	// log-probabilities are computed from them in this many chunks of a
	// row's tokens (Unsloth's chunked_hidden_states_selective_log_softmax):
	// a no-grad pass holds one chunk's logits at a time, a training pass
	// one chunk of the projection's output and every chunk's fp32 copy.
	HiddenChunks int `json:"hidden_chunks,omitempty"`
	// Entropy: the training pass computes each token's entropy for the
	// logs, in chunks of 128 positions under no_grad
	// (trl/trainer/utils.py entropy_from_logits l.526-560).
	Entropy bool `json:"entropy,omitempty"`
}

func (l LogProbLoss) check(seq int) error {
	if l.Tokens < 0 || l.Tokens > seq {
		return fieldRange("log_probs.tokens", l.Tokens, 0, seq)
	}
	if l.HiddenChunks < 0 || l.HiddenChunks > seq {
		return fieldRange("log_probs.hidden_chunks", l.HiddenChunks, 0, seq)
	}
	return nil
}

// logProbLoss adds the loss ops after the final norm's output x (h wide)
// for a vocabulary of v on this rank.
func logProbLoss(b *actBuilder, r *resolved, p blockPlan, x *actT, h, v int64) {
	l := r.LogProbs
	all := b.tokens
	keep := int64(r.SeqLen)
	if l.Tokens > 0 {
		keep = int64(l.Tokens) + 1 // logits_to_keep = completion + 1
	}
	perSeq := all / int64(max(r.SeqLen, 1))
	b.tokens = perSeq * keep
	if k := int64(l.HiddenChunks); k > 0 {
		// From the hidden states chunk by chunk: each chunk of the output
		// projection cast to fp32 at once, so only its fp32 copies add up
		// (Unsloth's chunked_hidden_states_selective_log_softmax).
		b.tokens = perSeq * ((keep + k - 1) / k)
	}
	logits := headLogits(b, p, x, h, v)
	b.tokens = perSeq * keep
	if l.LogitsFP32 && logits.dtype != FP32 {
		logits = b.op("logits_float", b.size(v, FP32), FP32, list(logits))
	}
	b.tokens = perSeq * (keep - 1) // logits[:, :-1] (a view)
	d := logits.dtype
	scaled := logits
	if l.TemperatureCopy {
		scaled = b.op("logits/temperature", b.size(v, d), d, list(logits))
	}
	if d == FP32 || l.Fused {
		// gather + logsumexp per row (or the fused kernel): the scaled
		// logits are saved for backward.
		b.keep(scaled)
		b.op("logsumexp", b.size(1, FP32), FP32, list(scaled))
	} else {
		b.keep(b.op("log_softmax", b.size(v, d), d, list(scaled)))
	}
	if l.Entropy {
		// 128 positions at a time: log_softmax and its exp.
		chunk := min(b.tokens, 128)
		b.workspace(d.Size(mulI64(2*chunk, v)))
	}
	b.op("per_token_loss", b.size(1, FP32), FP32, list(scaled))
	b.tokens = all
}

// fieldRange is the error of an integer field outside [lo, hi].
func fieldRange(field string, v, lo, hi int) error {
	return fmt.Errorf("%s must be in [%d, %d], got %d", field, lo, hi, v)
}
