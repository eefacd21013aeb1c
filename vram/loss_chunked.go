package vram

import "fmt"

// The chunked head: torchtitan's ChunkedLossWrapper (pytorch/torchtitan @
// b5bcd76c, torchtitan/components/loss.py:542-711, "LOSS"). The decoder
// stops at the final norm (the trainer sets model._skip_lm_head,
// trainer.py:498-523); the wrapper splits the hidden states into
// num_chunks views along the tokens (LOSS:602-611, each a detached leaf,
// no copy), makes an fp32 buffer of the hidden states' shape for their
// gradient (GradAccumulator, LOSS:639-643), and for each chunk runs the
// output projection, the loss — CrossEntropyLoss upcasts the chunk's
// logits, F.cross_entropy(pred.float(), …) at LOSS:57-62 — and
// chunk_loss.backward() at once (LOSS:694-700), adding the chunk's input
// gradient into the buffer. The loop's `logits` variable keeps the
// chunk's logits until the next chunk replaces them. After the loop the
// buffer, cast to the hidden states' dtype (LOSS:711), is the gradient
// the decoder's backward starts from (_DecoderOutputGradientBackProp,
// LOSS:772-809). So the whole logits never exist, and nothing of the
// vocabulary's size outlives its chunk; the output projection's weight
// gradient is made in the loop, just before the decoder's backward.

// chunkedHead builds the loop as ops that run without an autograd graph
// of their own (their backward runs inside the loss), one chunk standing
// for each: the chunks run one after another and alike.
func chunkedHead(b *actBuilder, r *resolved, p blockPlan, x *actT, h, v int64) {
	from := len(b.ops)
	all := b.tokens
	acc := b.op("grad_accumulator", b.size(h, FP32), FP32, list(x))
	b.tokens = (all + int64(r.LossChunks) - 1) / int64(r.LossChunks)
	logits := b.op("lm_head", b.size(v, p.e), p.e, list(x))
	var grad *actT
	if r.lossCompiled() {
		// BaseLoss._maybe_compile (LOSS:245-252): one fused kernel keeps
		// the log-sum-exp and writes the logits' gradient in their dtype.
		lse := b.op("logsumexp", b.size(1, FP32), FP32, list(logits))
		grad = b.op("cross_entropy_backward", b.size(v, p.e), p.e, list(logits, lse))
	} else {
		lf := b.op("logits.float", b.size(v, FP32), FP32, list(logits))
		ls := b.op("log_softmax", b.size(v, FP32), FP32, list(lf))
		gn := b.op("nll_loss_backward", b.size(v, FP32), FP32, nil) // zeros, the targets' entries set
		gs := b.op("log_softmax_backward", b.size(v, FP32), FP32, list(ls, gn))
		grad = b.op("logits.float.backward", b.size(v, p.e), p.e, list(gs))
	}
	gh := b.op("lm_head.backward", b.size(h, p.e), p.e, list(grad))
	b.op("grad_accumulator.add_", 0, FP32, list(acc, gh, logits))
	b.tokens = all
	result := b.op("grad_accumulator.result", b.size(h, x.dtype), x.dtype, list(acc))
	b.noGraph(from)
	b.keep(result) // the decoder's backward starts from it
}

// checkLossChunks: chunked_head's chunk count (default 8, LOSS:542-548)
// must split each micro-batch's tokens evenly, as the wrapper checks
// ("ChunkedLossWrapper sequence length must be divisible by num_chunks",
// LOSS:604-607); loss_chunks means nothing to the other losses.
func (r *resolved) checkLossChunks() error {
	if r.Loss != "chunked_head" {
		if r.LossChunks != 0 {
			return fmt.Errorf("loss_chunks %d: only loss chunked_head is computed in a number of chunks", r.LossChunks)
		}
		return nil
	}
	if r.m.Encoder() || r.m.EncoderDecoder() {
		return fmt.Errorf("loss chunked_head: torchtitan's chunked head runs a decoder's output projection; a %s model has none", r.m.Family)
	}
	if r.LossChunks == 0 {
		r.LossChunks = 8
	}
	tokens := r.MicroBatch * r.SeqLen
	if r.LossChunks < 1 || tokens%r.LossChunks != 0 {
		return fmt.Errorf("loss_chunks %d: ChunkedLossWrapper sequence length must be divisible by num_chunks (%d tokens a micro-batch)", r.LossChunks, tokens)
	}
	return nil
}
