package vram

import (
	"encoding/json"
	"errors"
	"reflect"
)

// File writes p as a plan file that ParsePlan reads back to the same plan:
// what an imported config became, for a user or an agent to edit and
// estimate again. The model is its catalog name where p names an unchanged
// catalog model, else its fields.
func (p Plan) File() ([]byte, error) {
	f := map[string]any{}
	if p.Name != "" {
		f["name"] = p.Name
	}
	if p.GPU != "" {
		f["gpu"] = p.GPU
	}
	switch pre, err := LookupPreset(p.ModelRef); {
	case IsHubRef(p.ModelRef):
		f["model"] = p.ModelRef
	case p.Checkpoint != nil:
		f["model"] = map[string]string{"checkpoint": p.ModelRef}
	case err == nil && reflect.DeepEqual(pre.Model, p.Model):
		f["model"] = p.ModelRef
	default:
		f["model"] = p.Model
	}
	if v := p.VLLM; v != nil && v.Draft != nil {
		// The draft goes in speculative_config.model: as the plan gave it,
		// else the model's fields.
		if v.Speculative == nil {
			return nil, errors.New("vllm: a draft model (VLLM.Draft) needs speculative_config: its method (eagle, eagle3 or draft_model) and num_speculative_tokens")
		}
		if len(v.Speculative.Model) == 0 {
			raw, err := json.Marshal(v.Draft)
			if err != nil {
				return nil, err
			}
			vc, sc := *v, *v.Speculative
			sc.Model = ModelRef(raw)
			vc.Speculative = &sc
			p.VLLM = &vc
		}
	}
	if sg := p.SGLang; sg != nil && sg.Draft != nil {
		// The draft goes in speculative.draft_model_path: as the plan gave
		// it, else the model's fields.
		if sg.Speculative == nil {
			return nil, errors.New("sglang: a draft model (SGLang.Draft) needs speculative.algorithm (EAGLE, EAGLE3 or STANDALONE)")
		}
		if len(sg.Speculative.DraftModelPath) == 0 {
			raw, err := json.Marshal(sg.Draft)
			if err != nil {
				return nil, err
			}
			sc, spc := *sg, *sg.Speculative
			spc.DraftModelPath = ModelRef(raw)
			sc.Speculative = &spc
			p.SGLang = &sc
		}
	}
	parts := []struct {
		key  string
		v    any
		omit []string // the model, which the plan holds at its top
	}{
		{"train", p.Training, []string{"model"}}, {"inference", p.Inference, []string{"model"}},
		{"vllm", p.VLLM, nil}, {"sglang", p.SGLang, nil}, {"tgi", p.TGI, nil}, {"llama_cpp", p.LlamaCpp, nil}, {"ollama", p.Ollama, nil},
		{"post_training", p.PostTraining, nil}, {"search", p.Search, nil},
	}
	for _, part := range parts {
		if reflect.ValueOf(part.v).IsNil() {
			continue
		}
		m, err := asMap(part.v)
		if err != nil {
			return nil, err
		}
		for _, k := range part.omit {
			delete(m, k)
		}
		if pol, ok := m["policy"].(map[string]any); ok {
			delete(pol, "model")
		}
		f[part.key] = m
	}
	if p.Versions != (Versions{}) {
		f["versions"] = p.Versions
	}
	return json.MarshalIndent(f, "", "  ")
}

func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(b, &m)
	return m, err
}
