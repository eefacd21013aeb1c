package vram

import (
	"fmt"
	"sort"
	"strings"
)

// Preset is a catalog model with the config it was taken from.
type Preset struct {
	Model  Model
	Source string // the Hugging Face config.json the shape comes from
}

func hf(id string) string { return "https://huggingface.co/" + id + "/blob/main/config.json" }

// presets is the catalog. Each entry copies the shape fields of the cited
// config.json; Params, where set, is the published exact count that the
// tests check the tensor inventory against.
var presets = map[string]Preset{
	// GPT-2 (modeling_gpt2.py). 124,439,808 for gpt2: the count HF's
	// model.num_parameters() prints; also Karpathy's nanoGPT README ("124M").
	"gpt2":        {Model{Name: "gpt2", Family: "gpt2", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true, Params: 124439808}, hf("openai-community/gpt2")},
	"gpt2-medium": {Model{Name: "gpt2-medium", Family: "gpt2", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-medium")},
	"gpt2-large":  {Model{Name: "gpt2-large", Family: "gpt2", Layers: 36, Hidden: 1280, Heads: 20, FFN: 5120, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-large")},
	"gpt2-xl":     {Model{Name: "gpt2-xl", Family: "gpt2", Layers: 48, Hidden: 1600, Heads: 25, FFN: 6400, Vocab: 50257, MaxPosition: 1024, TiedEmbeddings: true}, hf("openai-community/gpt2-xl")},

	// BERT (modeling_bert.py), BertModel with pooler. 335,141,888 for
	// bert-large-uncased: HF model card / BertModel(config).num_parameters().
	"bert-base-uncased":  {Model{Name: "bert-base-uncased", Family: "bert", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 30522, MaxPosition: 512, TypeVocab: 2, Pooler: true, Params: 109482240}, hf("google-bert/bert-base-uncased")},
	"bert-large-uncased": {Model{Name: "bert-large-uncased", Family: "bert", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 30522, MaxPosition: 512, TypeVocab: 2, Pooler: true, Params: 335141888}, hf("google-bert/bert-large-uncased")},

	// ViT (modeling_vit.py), ViTModel with pooler.
	"vit-base-patch16-224":  {Model{Name: "vit-base-patch16-224", Family: "vit", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Pooler: true, Image: &Image{Size: 224, Patch: 16, Channels: 3, ClassToken: true}}, hf("google/vit-base-patch16-224-in21k")},
	"vit-large-patch16-224": {Model{Name: "vit-large-patch16-224", Family: "vit", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Pooler: true, Image: &Image{Size: 224, Patch: 16, Channels: 3, ClassToken: true}}, hf("google/vit-large-patch16-224-in21k")},

	// Pythia / GPT-NeoX (modeling_gpt_neox.py).
	"pythia-160m":  {Model{Name: "EleutherAI/pythia-160m", Family: "gpt_neox", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-160m")},
	"pythia-410m":  {Model{Name: "EleutherAI/pythia-410m", Family: "gpt_neox", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25, Params: 405334016}, hf("EleutherAI/pythia-410m")},
	"pythia-1.4b":  {Model{Name: "EleutherAI/pythia-1.4b", Family: "gpt_neox", Layers: 24, Hidden: 2048, Heads: 16, FFN: 8192, Vocab: 50304, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-1.4b")},
	"pythia-6.9b":  {Model{Name: "EleutherAI/pythia-6.9b", Family: "gpt_neox", Layers: 32, Hidden: 4096, Heads: 32, FFN: 16384, Vocab: 50432, MaxPosition: 2048, RotaryPct: 0.25}, hf("EleutherAI/pythia-6.9b")},
	"gpt-neox-20b": {Model{Name: "EleutherAI/gpt-neox-20b", Family: "gpt_neox", Layers: 44, Hidden: 6144, Heads: 64, FFN: 24576, Vocab: 50432, MaxPosition: 2048, RotaryPct: 0.25, Params: 20554567680}, hf("EleutherAI/gpt-neox-20b")},
	"gpt-j-6b":     {Model{Name: "EleutherAI/gpt-j-6b", Family: "gptj", Layers: 28, Hidden: 4096, Heads: 16, FFN: 16384, Vocab: 50400, MaxPosition: 2048, RotaryPct: 0.25, Params: 6050882784}, hf("EleutherAI/gpt-j-6b")},

	// OPT (modeling_opt.py).
	"opt-125m": {Model{Name: "facebook/opt-125m", Family: "opt", Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-125m")},
	"opt-350m": {Model{Name: "facebook/opt-350m", Family: "opt", Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true, NormPosition: "post", WordEmbedProjDim: 512, Params: 331196416}, hf("facebook/opt-350m")},
	"opt-1.3b": {Model{Name: "facebook/opt-1.3b", Family: "opt", Layers: 24, Hidden: 2048, Heads: 32, FFN: 8192, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-1.3b")},
	"opt-6.7b": {Model{Name: "facebook/opt-6.7b", Family: "opt", Layers: 32, Hidden: 4096, Heads: 32, FFN: 16384, Vocab: 50272, MaxPosition: 2048, TiedEmbeddings: true}, hf("facebook/opt-6.7b")},

	// Llama 1/2/3 (modeling_llama.py). Llama-2-7b 6,738,415,616 and
	// Meta-Llama-3-8B 8,030,261,248: the totals in the checkpoints'
	// model.safetensors.index.json metadata.total_size / 2 (bf16).
	"llama-7b":       {Model{Name: "huggyllama/llama-7b", Family: "llama", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 32000, MaxPosition: 2048}, hf("huggyllama/llama-7b")},
	"llama-2-7b":     {Model{Name: "meta-llama/Llama-2-7b-hf", Family: "llama", Layers: 32, Hidden: 4096, Heads: 32, FFN: 11008, Vocab: 32000, MaxPosition: 4096, Params: 6738415616}, hf("meta-llama/Llama-2-7b-hf")},
	"llama-2-13b":    {Model{Name: "meta-llama/Llama-2-13b-hf", Family: "llama", Layers: 40, Hidden: 5120, Heads: 40, FFN: 13824, Vocab: 32000, MaxPosition: 4096, Params: 13015864320}, hf("meta-llama/Llama-2-13b-hf")},
	"llama-2-70b":    {Model{Name: "meta-llama/Llama-2-70b-hf", Family: "llama", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 32000, MaxPosition: 4096, Params: 68976648192}, hf("meta-llama/Llama-2-70b-hf")},
	"codellama-34b":  {Model{Name: "codellama/CodeLlama-34b-hf", Family: "llama", Layers: 48, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 22016, Vocab: 32000, MaxPosition: 16384, Params: 33743970304}, hf("codellama/CodeLlama-34b-hf")},
	"llama-3-8b":     {Model{Name: "meta-llama/Meta-Llama-3-8B", Family: "llama", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, MaxPosition: 8192, Params: 8030261248}, hf("meta-llama/Meta-Llama-3-8B")},
	"llama-3.1-8b":   {Model{Name: "meta-llama/Llama-3.1-8B", Family: "llama", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, MaxPosition: 131072, Params: 8030261248}, hf("meta-llama/Llama-3.1-8B")},
	"llama-3.1-70b":  {Model{Name: "meta-llama/Llama-3.1-70B", Family: "llama", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 28672, Vocab: 128256, MaxPosition: 131072, Params: 70553706496}, hf("meta-llama/Llama-3.1-70B")},
	"llama-3.1-405b": {Model{Name: "meta-llama/Llama-3.1-405B", Family: "llama", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, FFN: 53248, Vocab: 128256, MaxPosition: 131072}, hf("meta-llama/Llama-3.1-405B")},
	"llama-3.2-1b":   {Model{Name: "meta-llama/Llama-3.2-1B", Family: "llama", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256, MaxPosition: 131072, TiedEmbeddings: true}, hf("meta-llama/Llama-3.2-1B")},
	"llama-3.2-3b":   {Model{Name: "meta-llama/Llama-3.2-3B", Family: "llama", Layers: 28, Hidden: 3072, Heads: 24, KVHeads: 8, HeadDim: 128, FFN: 8192, Vocab: 128256, MaxPosition: 131072, TiedEmbeddings: true}, hf("meta-llama/Llama-3.2-3B")},
	"tinyllama-1.1b": {Model{Name: "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", Family: "llama", Layers: 22, Hidden: 2048, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, MaxPosition: 2048}, hf("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T")},

	// Mistral / Mixtral (modeling_mistral.py, modeling_mixtral.py).
	// Mixtral-8x7B 46,702,792,704: model.safetensors.index.json total_size / 2.
	"mistral-7b":    {Model{Name: "mistralai/Mistral-7B-v0.1", Family: "mistral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768, SlidingWindow: 4096}, hf("mistralai/Mistral-7B-v0.1")},
	"mixtral-8x7b":  {Model{Name: "mistralai/Mixtral-8x7B-v0.1", Family: "mixtral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, MaxPosition: 32768, Experts: 8, ExpertsPerToken: 2, Params: 46702792704}, hf("mistralai/Mixtral-8x7B-v0.1")},
	"mixtral-8x22b": {Model{Name: "mistralai/Mixtral-8x22B-v0.1", Family: "mixtral", Layers: 56, Hidden: 6144, Heads: 48, KVHeads: 8, FFN: 16384, Vocab: 32768, MaxPosition: 65536, Experts: 8, ExpertsPerToken: 2}, hf("mistralai/Mixtral-8x22B-v0.1")},

	// Qwen2.5 (modeling_qwen2.py): q/k/v biases.
	"qwen2.5-0.5b": {Model{Name: "Qwen/Qwen2.5-0.5B", Family: "qwen2", Layers: 24, Hidden: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, MaxPosition: 32768, TiedEmbeddings: true}, hf("Qwen/Qwen2.5-0.5B")},
	"qwen2.5-7b":   {Model{Name: "Qwen/Qwen2.5-7B", Family: "qwen2", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, FFN: 18944, Vocab: 152064, MaxPosition: 131072}, hf("Qwen/Qwen2.5-7B")},
	"qwen2.5-72b":  {Model{Name: "Qwen/Qwen2.5-72B", Family: "qwen2", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, FFN: 29568, Vocab: 152064, MaxPosition: 131072}, hf("Qwen/Qwen2.5-72B")},

	// Gemma (modeling_gemma.py): head_dim 256, GeGLU, tied.
	"gemma-2b": {Model{Name: "google/gemma-2b", Family: "gemma", Layers: 18, Hidden: 2048, Heads: 8, KVHeads: 1, HeadDim: 256, FFN: 16384, Vocab: 256000, MaxPosition: 8192, TiedEmbeddings: true}, hf("google/gemma-2b")},
	"gemma-7b": {Model{Name: "google/gemma-7b", Family: "gemma", Layers: 28, Hidden: 3072, Heads: 16, HeadDim: 256, FFN: 24576, Vocab: 256000, MaxPosition: 8192, TiedEmbeddings: true}, hf("google/gemma-7b")},

	// Phi (modeling_phi.py, modeling_phi3.py).
	"phi-1.5":       {Model{Name: "microsoft/phi-1_5", Family: "phi", Layers: 24, Hidden: 2048, Heads: 32, FFN: 8192, Vocab: 51200, MaxPosition: 2048, RotaryPct: 0.5, Params: 1418270720}, hf("microsoft/phi-1_5")},
	"phi-2":         {Model{Name: "microsoft/phi-2", Family: "phi", Layers: 32, Hidden: 2560, Heads: 32, FFN: 10240, Vocab: 51200, MaxPosition: 2048, RotaryPct: 0.4}, hf("microsoft/phi-2")},
	"phi-3-mini-4k": {Model{Name: "microsoft/Phi-3-mini-4k-instruct", Family: "phi3", Layers: 32, Hidden: 3072, Heads: 32, FFN: 8192, Vocab: 32064, MaxPosition: 4096}, hf("microsoft/Phi-3-mini-4k-instruct")},

	// StarCoder (modeling_gpt_bigcode.py): multi-query attention.
	"starcoderbase-1b": {Model{Name: "bigcode/starcoderbase-1b", Family: "gpt_bigcode", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 1, FFN: 8192, Vocab: 49152, MaxPosition: 8192}, hf("bigcode/starcoderbase-1b")},
	"starcoder":        {Model{Name: "bigcode/starcoder", Family: "gpt_bigcode", Layers: 40, Hidden: 6144, Heads: 48, KVHeads: 1, FFN: 24576, Vocab: 49152, MaxPosition: 8192}, hf("bigcode/starcoder")},

	// DeepSeek-V3 (modeling_deepseek_v3.py): MLA, 1 shared + 256 routed
	// experts (top 8), first 3 layers dense; the multi-token-prediction
	// module of the checkpoint is not part of the HF model.
	"deepseek-v3": {Model{Name: "deepseek-ai/DeepSeek-V3", Family: "deepseek_v3", Layers: 61, Hidden: 7168, Heads: 128, FFN: 18432, Vocab: 129280, MaxPosition: 163840,
		Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, DenseLayers: 3,
		QLoRARank: 1536, KVLoRARank: 512, QKNopeDim: 128, QKRopeDim: 64, VHeadDim: 128, HeadDim: 192}, hf("deepseek-ai/DeepSeek-V3")},
}

// Presets returns the catalog's names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupPreset returns a catalog entry by name (case-insensitive; the Hugging
// Face id such as "meta-llama/Llama-2-7b-hf" works too). The entry is a deep
// copy: changing it never changes the catalog.
func LookupPreset(name string) (Preset, error) {
	k := strings.ToLower(strings.TrimSpace(name))
	if p, ok := presets[k]; ok {
		return p.clone(), nil
	}
	for _, p := range presets {
		if strings.EqualFold(p.Model.Name, name) {
			return p.clone(), nil
		}
	}
	return Preset{}, fmt.Errorf("unknown model preset %q%s (the catalog's %d names: vram.Presets(), or go run ./examples/plan -presets)",
		name, didYouMean(name, Presets()), len(presets))
}

// clone copies the preset's model, pointers included.
func (p Preset) clone() Preset {
	p.Model = p.Model.clone()
	return p
}

// FromPreset is the catalog model of that name, for notebooks and other code
// where a name is typed in: a name the catalog does not know gives a model
// that Validate (and so every estimate) rejects with "model.name: unknown
// model preset …" and the known names, instead of a panic.
func FromPreset(name string) Model {
	p, err := LookupPreset(name)
	if err != nil {
		return Model{Name: name}
	}
	return p.Model
}

// MustPreset is LookupPreset for names known at compile time; it panics on a
// typo, which tests catch.
func MustPreset(name string) Model {
	p, err := LookupPreset(name)
	if err != nil {
		panic(err)
	}
	return p.Model
}
