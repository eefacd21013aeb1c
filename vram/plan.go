package vram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Plan is a plan file: a model and either a training or an inference run.
//
//	{
//	  "name": "Llama-3-8B LoRA, one A100",
//	  "model": "llama-3-8b",
//	  "train": {"seq_len": 2048, "micro_batch": 4, "precision": "bf16",
//	            "optimizer": "adamw", "lora": {"rank": 16, "targets": ["q_proj", "v_proj"]}},
//	  "gpu": "A100-80GB"
//	}
//
// "model" is a catalog name (see Presets), an inline Model object, or
// {"hf_config": "path/to/config.json"} relative to the plan file. "train"
// takes the fields of Training, "inference" those of Inference; exactly one
// of them is required. "gpu" optionally names a target GPU (see GPUs) or gives
// a capacity such as "80 GiB". Unknown fields are errors, so a typo never
// silently falls back to a default.
type Plan struct {
	Name      string     `json:"name,omitempty"`
	Model     Model      `json:"-"`
	ModelRef  string     `json:"-"` // the preset name or config path the model came from
	Training  *Training  `json:"train,omitempty"`
	Inference *Inference `json:"inference,omitempty"`
	GPU       string     `json:"gpu,omitempty"`
}

// ReadPlan reads a plan file.
func ReadPlan(path string) (Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, err
	}
	p, err := ParsePlan(data, filepath.Dir(path))
	if err != nil {
		return Plan{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePlan decodes a plan; dir resolves a relative "hf_config" path.
func ParsePlan(data []byte, dir string) (Plan, error) {
	var raw struct {
		Name      string          `json:"name"`
		Model     json.RawMessage `json:"model"`
		Train     json.RawMessage `json:"train"`
		Inference json.RawMessage `json:"inference"`
		GPU       string          `json:"gpu"`
	}
	if err := strictDecode(data, &raw); err != nil {
		return Plan{}, err
	}
	p := Plan{Name: raw.Name, GPU: raw.GPU}
	m, ref, err := decodeModel(raw.Model, dir)
	if err != nil {
		return Plan{}, err
	}
	p.Model, p.ModelRef = m, ref
	switch {
	case len(raw.Train) > 0 && len(raw.Inference) > 0:
		return Plan{}, errors.New(`plan: give "train" or "inference", not both`)
	case len(raw.Train) > 0:
		var t Training
		if err := strictDecode(raw.Train, &t); err != nil {
			return Plan{}, fmt.Errorf("train: %w", err)
		}
		t.Model = m
		if err := t.Validate(); err != nil {
			return Plan{}, fmt.Errorf("train: %w", err)
		}
		p.Training = &t
	case len(raw.Inference) > 0:
		var in Inference
		if err := strictDecode(raw.Inference, &in); err != nil {
			return Plan{}, fmt.Errorf("inference: %w", err)
		}
		in.Model = m
		if err := in.Validate(); err != nil {
			return Plan{}, fmt.Errorf("inference: %w", err)
		}
		p.Inference = &in
	default:
		return Plan{}, errors.New(`plan: a "train" or "inference" object is required`)
	}
	return p, nil
}

func decodeModel(raw json.RawMessage, dir string) (Model, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Model{}, "", fmt.Errorf(`plan: "model" is required: a catalog name (%s), an object, or {"hf_config": "config.json"}`, strings.Join(Presets()[:5], ", ")+", …")
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return Model{}, "", fmt.Errorf("model: %v", err)
		}
		p, err := LookupPreset(name)
		if err != nil {
			return Model{}, "", fmt.Errorf("model: %w", err)
		}
		return p.Model, name, nil
	}
	var ref struct {
		HFConfig string `json:"hf_config"`
	}
	if json.Unmarshal(raw, &ref) == nil && ref.HFConfig != "" {
		path := ref.HFConfig
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return Model{}, "", fmt.Errorf("model.hf_config: %v", err)
		}
		m, err := FromHFConfig(b)
		if err != nil {
			return Model{}, "", fmt.Errorf("model.hf_config %s: %w", ref.HFConfig, err)
		}
		return m, ref.HFConfig, nil
	}
	var m Model
	if err := strictDecode(raw, &m); err != nil {
		return Model{}, "", fmt.Errorf("model: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Model{}, "", err
	}
	return m, m.Name, nil
}

// strictDecode rejects unknown fields and trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}
