package vram

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Checkpoint is a local model folder read without loading a weight: its
// config.json and its safetensors headers, matched tensor by tensor against
// the family's declaration.
//
//	ck, err := vram.OpenCheckpoint("models/Qwen3-8B-FP8")
//	in := vram.Inference{Model: ck.Model, Batch: 8, PromptTokens: 4096, NewTokens: 512}.WithCheckpoint(ck)
type Checkpoint struct {
	Model Model `json:"model"`
	// Stored is what the checkpoint stores for each of the model's tensors
	// (by its name in Model.Tensors): the tensor itself in its stored dtype,
	// or its quantized parts (packed weights, zero points, scales, block
	// scales) together.
	Stored map[string]Bytes `json:"-"`
	Total  Bytes            `json:"total"`
	// Format names how the linear weights are stored: a float dtype, "fp8"
	// (with their scales), "gptq/awq int4" (packed, with scales and zeros),
	// "mxfp4" (4-bit blocks with shared 8-bit exponents).
	Format string `json:"format"`
	// Unused lists checkpoint tensors the model does not declare, which
	// transformers skips at load (DeepSeek-V3's multi-token-prediction
	// layer, say).
	Unused []string `json:"unused,omitempty"`
}

// OpenCheckpoint reads the checkpoint folder dir (see Checkpoint).
func OpenCheckpoint(dir string) (Checkpoint, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Checkpoint{}, err
	}
	defer root.Close()
	return openCheckpoint(root, dir)
}

// openCheckpoint reads config.json and the safetensors headers inside root
// (where names the folder in messages).
func openCheckpoint(root *os.Root, where string) (Checkpoint, error) {
	cfg, err := readFileIn(root, "config.json", MaxConfigFile)
	if err == nil && exists(root, "hf_quant_config.json") {
		cfg, err = withModelOptConfig(root, cfg)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", where, err)
	}
	m, err := FromHFConfig(cfg)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", where, err)
	}
	var ts []Tensor
	switch {
	case exists(root, "model.safetensors.index.json"):
		ts, err = readIndex(root, "model.safetensors.index.json")
	case hasShard(root, "model.safetensors"):
		left := int64(MaxHeadersBytes)
		ts, err = readShard(root, "model.safetensors", &left)
	default:
		err = errNoSafetensors
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", where, err)
	}
	ck, err := matchCheckpoint(m, ts)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", where, err)
	}
	return ck, nil
}

// withModelOptConfig folds a ModelOpt export's hf_quant_config.json
// ({"producer": …, "quantization": {"quant_algo": "NVFP4", "group_size":
// 16, "exclude_modules": […]}}) into config.json as the quantization_config
// it stands for, as vLLM reads it when config.json has none
// (ModelOptQuantConfigBase.get_config_filenames and from_config,
// model_executor/layers/quantization/modelopt.py:309, 324-343 in 0.33.0).
func withModelOptConfig(root *os.Root, cfg []byte) ([]byte, error) {
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		return cfg, nil // FromHFConfig says what is wrong with config.json
	}
	if _, ok := c["quantization_config"]; ok {
		return cfg, nil // config.json's own wins, as in vLLM
	}
	b, err := readFileIn(root, "hf_quant_config.json", MaxConfigFile)
	if err != nil {
		return nil, err
	}
	var hq struct {
		Quantization map[string]any `json:"quantization"`
	}
	if err := json.Unmarshal(b, &hq); err != nil || hq.Quantization == nil {
		return nil, fmt.Errorf("hf_quant_config.json: want ModelOpt's {\"quantization\": {\"quant_algo\": …}} (%v)", err)
	}
	hq.Quantization["quant_method"] = "modelopt"
	c["quantization_config"] = hq.Quantization
	return json.Marshal(c)
}

func exists(root *os.Root, name string) bool {
	_, err := root.Stat(name)
	return err == nil
}

// quantParts are the suffixes quantized checkpoints store a linear weight
// under, by format: GPTQ and AWQ pack int4 into int32 qweight with qzeros
// and scales (and g_idx for GPTQ's act-order), fp8 checkpoints keep the
// weight in F8_E4M3 with its inverse scale (DeepSeek-V3's 128×128 blocks) or
// scale, MXFP4 (gpt-oss's experts) 4-bit blocks with 8-bit scales.
var quantParts = []struct {
	suffix, replace, format string
}{
	{".qweight", ".weight", "gptq/awq int4"},
	{".qzeros", ".weight", "gptq/awq int4"},
	{".scales", ".weight", "gptq/awq int4"},
	{".g_idx", ".weight", "gptq/awq int4"},
	{".weight_scale_inv", ".weight", "fp8"},
	{".weight_scale_2", ".weight", "nvfp4"},
	{".weight_packed", ".weight", "compressed-tensors"},
	{".weight_global_scale", ".weight", "nvfp4"},
	{".input_global_scale", ".weight", "nvfp4"},
	{".weight_scale", ".weight", "fp8"},
	{".input_scale", ".weight", "fp8"},
	{"_blocks", "", "mxfp4"},
	{"_scales", "", "mxfp4"},
	{"_scale", "", "fp8"}, // fbgemm's stacked experts: gate_up_proj_scale [E, 1, 2F]
}

// matchCheckpoint assigns each checkpoint tensor to the model tensor it
// stores, checks every model tensor is there with its declared shape (a
// quantized one by its parts), and sums what is stored per tensor.
func matchCheckpoint(m Model, ts []Tensor) (Checkpoint, error) {
	m = m.Normalize()
	declared := map[string]Tensor{}
	for _, t := range m.Tensors() {
		declared[t.Name] = t
	}
	buffers := map[string]bool{}
	for _, b := range m.Buffers() {
		buffers[b.Name] = true
	}
	ck := Checkpoint{Model: m, Stored: map[string]Bytes{}}
	formats := map[string]bool{}
	floats := map[DType]int64{}
	for _, c := range ts {
		c.Name = m.currentName(c.Name)
		ck.Total = addBytes(ck.Total, c.Bytes)
		if d, ok := declared[c.Name]; ok {
			if c.DType.IsFloat() && !sameShape(c.Shape, d.Shape) && !transposedLinear(m, c.Shape, d.Shape) {
				return ck, fmt.Errorf("tensor %s: the checkpoint stores shape %v, the %s model declares %v (check config.json)", c.Name, c.Shape, m.Family, d.Shape)
			}
			ck.Stored[c.Name] = addBytes(ck.Stored[c.Name], c.Bytes)
			if c.DType == FP8E4M3 || c.DType == FP8E5M2 {
				formats["fp8"] = true
			} else if d.IsLinear() {
				floats[c.DType] += c.Numel()
			}
			continue
		}
		owner := ""
		for _, q := range quantParts {
			if stem, ok := strings.CutSuffix(c.Name, q.suffix); ok {
				if _, ok := declared[stem+q.replace]; ok {
					owner = stem + q.replace
					formats[q.format] = true
					break
				}
			}
		}
		switch {
		case owner != "":
			ck.Stored[owner] = addBytes(ck.Stored[owner], c.Bytes)
		case buffers[c.Name]:
			// A module buffer saved with the weights (rotary inv_freq,
			// DeepSeek's e_score_correction_bias): not a parameter.
		default:
			ck.Unused = append(ck.Unused, c.Name)
		}
	}
	var missing []string
	for name := range declared {
		if _, ok := ck.Stored[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		more := ""
		if len(missing) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(missing)-1)
		}
		return ck, fmt.Errorf("tensor %s%s: the %s model declares it, the checkpoint does not store it (a different architecture, or a quantization format not modelled)", missing[0], more, m.Family)
	}
	switch {
	case len(formats) > 1:
		names := make([]string, 0, len(formats))
		for f := range formats {
			names = append(names, f)
		}
		sort.Strings(names)
		ck.Format = strings.Join(names, " + ")
	case len(formats) == 1:
		for f := range formats {
			ck.Format = f
		}
	default:
		var best DType
		for d, n := range floats {
			if n > floats[best] {
				best = d
			}
		}
		ck.Format = best.String()
	}
	return ck, nil
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// transposedLinear: a family that stores matmul weights [in, out] (its
// recipe's conv1D) against the engine's [out, in].
func transposedLinear(m Model, stored, declared []int64) bool {
	return m.recipeOf(pinned).conv1D && len(stored) == 2 && len(declared) == 2 && stored[0] == declared[1] && stored[1] == declared[0]
}

// WithCheckpoint makes the plan load its weights as the checkpoint stores
// them, unless it names a weight format of its own.
func (in Inference) WithCheckpoint(ck Checkpoint) Inference {
	in.stored = ck.Stored
	return in
}

// readCheckpointIn opens the checkpoint folder a plan names (userPath).
func readCheckpointIn(dir, name string) (Checkpoint, error) {
	if name == "" {
		return Checkpoint{}, errors.New("model.checkpoint: give the path of a checkpoint folder (absolute, ~/…, or beside the plan)")
	}
	path, err := userPath(dir, name)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model.checkpoint: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model.checkpoint: %w", err)
	}
	if !st.IsDir() {
		return Checkpoint{}, fmt.Errorf("model.checkpoint %q: want a folder holding config.json and the safetensors", name)
	}
	ck, err := OpenCheckpoint(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model.checkpoint %w", err)
	}
	return ck, nil
}

// userPath is a path a user typed in a plan: absolute, under their home
// (~/…), or relative to the plan's folder dir. (The rule that files stay
// inside a folder is for the names an index file gives, not for these.)
func userPath(dir, name string) (string, error) {
	if name == "~" || strings.HasPrefix(name, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%q: no home folder to expand ~ in: %v", name, err)
		}
		return filepath.Join(home, name[1:]), nil
	}
	if filepath.IsAbs(name) {
		return name, nil
	}
	if dir == "" {
		dir = "."
	}
	return filepath.Join(dir, name), nil
}
