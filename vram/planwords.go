package vram

import (
	"sort"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// strictDecode decodes one JSON value of a plan into v (internal/strictjson:
// keys spelled exactly, nothing after the value, an explicit 0 refused
// where a field's `zero` tag says why); prefix names where the value sits
// ("train.") in the errors, which name the plan's words.
func strictDecode(data []byte, v any, prefix string) error {
	return strictjson.Decode(data, v, prefix, strictjson.Hints{Name: "the plan", Values: enumValues, Aliases: keyAliases, Suggest: didYouMean})
}

// JSONWant says what a size field takes, for a plan's errors.
func (Bytes) JSONWant() string { return "a size (a number of bytes or a string such as \"80 GiB\")" }

// JSONWant says what a dtype field takes, for a plan's errors.
func (DType) JSONWant() string { return "a dtype name (a string such as \"bf16\")" }

// keyAliases are keys users bring from their trainers' and engines'
// configs, and how a plan says each (the first word is the plan's key):
// closer than any spelling, which would offer "lora" for "qlora".
var keyAliases = map[string]string{
	"qlora":                       `quantized_base ({"dtype": "nf4", "double_quant": true}) with a lora`,
	"load_in_4bit":                `quantized_base ({"dtype": "nf4"}) with a lora`,
	"adapter":                     `lora, with trainable "lora"`,
	"gradient_checkpointing":      `grad_checkpointing ("full", "selective", "op", "none")`,
	"activation_checkpointing":    `grad_checkpointing ("full", "selective", "op", "none")`,
	"gradient_accumulation_steps": "grad_accum",
	"batch_size":                  "micro_batch (per GPU)",
	"micro_batch_size":            "micro_batch",
	"per_device_train_batch_size": "micro_batch",
	"sequence_len":                "seq_len",
	"max_seq_len":                 "seq_len",
	"max_length":                  "seq_len",
	"seq_length":                  "seq_len",
	"bf16":                        `precision ("bf16", "amp_bf16", "mixed_bf16")`,
	"fp16":                        `precision ("fp16", "amp_fp16", "mixed_fp16")`,
	"mixed_precision":             `precision ("amp_bf16", "mixed_bf16", …)`,
	"flash_attention":             `attention ("flash2")`,
	"attn_implementation":         `attention ("sdpa", "flash2", "eager")`,
	"zero_stage":                  "parallel (its zero_stage)",
	"tensor_parallel_size":        "parallel (its tp) for training, or vllm's tensor_parallel_size for serving",
	"max_model_len":               "vllm (its max_model_len)",
	"gpu_memory_utilization":      "vllm (its gpu_memory_utilization)",
}

// enumValues are the values of each plan field that takes one of a list of
// words, by its JSON name: a type error names them ("grad_checkpointing":
// true wants one of the strings none, selective, …). enum fills it where
// each list is declared, which validation checks against (oneOf).
var enumValues = map[string][]string{}

// enum declares a field's words, for its error messages and oneOf.
func enum[S ~string](field string, values ...S) []S {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = string(v)
	}
	enumValues[field] = append(enumValues[field], words...)
	return values
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
