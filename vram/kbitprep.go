package vram

import "fmt"

// PEFT's prepare_model_for_kbit_training (peft 0.21.2 utils/other.py:158-
// 233), which the QLoRA recipe's scripts call on the quantized base before
// get_peft_model, casts every fp16 or bf16 parameter that is not a 4-bit
// one to fp32 (l.204-209): the embeddings, the norms, the output head and
// any biases. The forward then changes dtype with them:
//   - the embedding's output, and so the residual stream, is fp32;
//   - a norm multiplies by its fp32 weight, so its output is fp32 too;
//   - bitsandbytes' Linear4bit takes an fp32 input's dtype as its compute
//     dtype and returns its input's dtype (fourbit.go, activations.go
//     matmulIn), so the projections that read the stream return fp32.
// TRL's SFTTrainer calls it for an unsharded quantized base up to 0.21.0
// and casts the embeddings and head back to bf16 after (peft_module_
// casting_to_bf16, trl 0.21.0 trainer/sft_trainer.py:596-631,
// trainer/utils.py:582-589); from 0.22.0 it does not call it, nor do
// axolotl (which casts the norms and embeddings back to the compute dtype),
// litgpt, torchtune or unsloth. Training.KbitPrep says the plan's script
// calls it.

// resolveKbitPrep applies prepare_model_for_kbit_training: the base's
// unquantized weights (Training.WeightsDType for a quantized base) in fp32.
func (r *resolved) resolveKbitPrep() error {
	if !r.KbitPrep {
		return nil
	}
	if !r.QuantizedBase.Quantized() {
		return fmt.Errorf("kbit_prep: prepare_model_for_kbit_training prepares a quantized base; set quantized_base (nf4, fp4, int8 or int4) or drop kbit_prep")
	}
	if !r.runsTransformers() {
		return fmt.Errorf("kbit_prep: prepare_model_for_kbit_training runs on a transformers model (framework hf_trainer, accelerate or plain_pytorch), not under %s", r.Framework)
	}
	if r.WeightsDType != FP32 {
		r.notes = append(r.notes, fmt.Sprintf("kbit_prep: prepare_model_for_kbit_training casts the base's %s weights that are not quantized (embeddings, norms, head) to fp32; the residual stream, the norms' outputs and the 4-bit projections' outputs run in fp32", r.WeightsDType))
	}
	r.WeightsDType = FP32
	return nil
}
