package vram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
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
// "model" is a catalog name (see Presets), an inline Model object,
// {"hf_config": "path/to/config.json"} or {"checkpoint": "path/to/folder"}
// (config.json and safetensors headers, see Checkpoint): absolute, under the
// user's home (~/…) or relative to the plan file. "train"
// takes the fields of Training, "inference" those of Inference; exactly one
// of them is required. "gpu" optionally names a target GPU (see GPUs) or gives
// a capacity such as "80 GiB". Unknown fields are errors, so a typo never
// silently falls back to a default.
type Plan struct {
	Name     string `json:"name,omitempty"`
	Model    Model  `json:"-"`
	ModelRef string `json:"-"` // the preset name or config path the model came from
	// Checkpoint is set when the model was read from a checkpoint folder;
	// an inference plan then loads the weights as stored.
	Checkpoint *Checkpoint `json:"-"`
	Training   *Training   `json:"train,omitempty"`
	Inference  *Inference  `json:"inference,omitempty"`
	GPU        string      `json:"gpu,omitempty"`
	// VLLM serves an inference plan with vLLM's settings: the plan command
	// then shows how vLLM carves the GPU (VLLM.Carve).
	VLLM *VLLM `json:"vllm,omitempty"`
	// SGLang serves it with SGLang's settings (SGLang.Carve).
	SGLang *SGLang `json:"sglang,omitempty"`
	// TGI serves it with Hugging Face TGI's settings (TGI.Carve).
	TGI *TGI `json:"tgi,omitempty"`
	// LlamaCpp serves it with llama-server's settings: the plan command
	// then shows llama.cpp's automatic fit (LlamaCpp.FitParams) where the
	// build fits by default or "fit" is true.
	LlamaCpp *LlamaCpp `json:"llama_cpp,omitempty"`
	// Ollama serves it with Ollama's settings: the plan command then shows
	// how the release places it (Ollama.Place: from 0.30.0 llama-server
	// and llama.cpp's fit).
	Ollama *Ollama `json:"ollama,omitempty"`
	// PostTraining is a post-training run (GRPO, RLOO, DPO) instead of a
	// training or inference one: its policy is the plan's model.
	PostTraining *PostTraining `json:"post_training,omitempty"`
	// Versions names the releases the run uses (versions.go); each is
	// given to the part of the plan it runs.
	Versions Versions `json:"versions,omitzero"`
	// Search asks for the training plan's layouts on a number of GPUs
	// (search.go): its micro_batch may then be left out, to be searched.
	Search *SearchSettings `json:"search,omitempty"`
}

// SearchSettings are a plan file's "search": the GPUs (of the plan's
// gpu) and the global batch a layout search lays the run out for.
type SearchSettings struct {
	GPUs        int `json:"gpus"`
	GlobalBatch int `json:"global_batch,omitempty"` // sequences a step (default: one a GPU)
	// NetworkBandwidth is each GPU's network bandwidth across nodes, bytes
	// a second (default 50e9).
	NetworkBandwidth float64 `json:"network_bandwidth,omitempty"`
	// HostMemory is a node's host memory, which offloaded layouts must fit
	// (SearchSpace.HostMemory; unset: not checked).
	HostMemory Bytes `json:"host_memory,omitempty"`
}

// ReadPlan reads a plan file (a regular file of at most MaxPlanFile bytes).
// The files it names are found beside it, beside the file a link points to
// when path is a link.
func ReadPlan(path string) (Plan, error) {
	data, err := readFile(path, MaxPlanFile)
	if err != nil {
		return Plan{}, err
	}
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dir = filepath.Dir(real)
	}
	p, err := ParsePlan(data, dir)
	if err != nil {
		return Plan{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ReadPlanModel reads only the model of the plan file at path: a preset
// name, a model object, a config.json or checkpoint folder, as ReadPlan
// reads it, without judging the rest of the plan. examples/measure writes
// a traced model's config.json from it (plan -hf-config), also for a
// family whose training is not modelled yet.
func ReadPlanModel(path string) (Model, error) {
	data, err := readFile(path, MaxPlanFile)
	if err != nil {
		return Model{}, err
	}
	// The plan's top level as ParsePlan reads it (unknown and duplicate
	// keys refused alike), its sections left unread.
	var top planFile
	if err := strictDecode(data, &top, ""); err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(top.Model) == 0 {
		return Model{}, fmt.Errorf("%s: plan: \"model\" is required", path)
	}
	m, _, _, err := DecodeModel(top.Model, filepath.Dir(path))
	if err != nil {
		return Model{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// planFile is a plan file's top level, as ParsePlan reads it.
type planFile struct {
	Name      string          `json:"name"`
	Model     json.RawMessage `json:"model"`
	Train     json.RawMessage `json:"train"`
	Inference json.RawMessage `json:"inference"`
	GPU       string          `json:"gpu"`
	VLLM      json.RawMessage `json:"vllm"`
	SGLang    json.RawMessage `json:"sglang"`
	TGI       json.RawMessage `json:"tgi"`
	LlamaCpp  json.RawMessage `json:"llama_cpp"`
	Ollama    json.RawMessage `json:"ollama"`
	Post      json.RawMessage `json:"post_training"`
	Versions  Versions        `json:"versions"`
	Search    json.RawMessage `json:"search"`
}

// PlanKeys are the keys a plan file's top level may hold.
func PlanKeys() []string {
	t := reflect.TypeFor[planFile]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
	}
	return keys
}

// ParsePlanContent decodes a plan given as content alone (an agent's, a
// web form's), reading no file and nothing from the network: its model is
// a catalog name, the model's fields or a config.json inline; a path or a
// hub id is refused, naming the field.
func ParsePlanContent(data []byte) (Plan, error) {
	var top struct {
		Model json.RawMessage `json:"model"`
		VLLM  struct {
			Speculative struct {
				Model json.RawMessage `json:"model"`
			} `json:"speculative_config"`
		} `json:"vllm"`
		SGLang struct {
			Speculative struct {
				DraftModelPath json.RawMessage `json:"draft_model_path"`
			} `json:"speculative"`
		} `json:"sglang"`
	}
	if json.Unmarshal(data, &top) == nil {
		if err := SealedModel(top.Model); err != nil {
			return Plan{}, err
		}
		if err := SealedModel(top.VLLM.Speculative.Model); err != nil {
			return Plan{}, fmt.Errorf("vllm.speculative_config.%w", err)
		}
		if err := SealedModel(top.SGLang.Speculative.DraftModelPath); err != nil {
			return Plan{}, fmt.Errorf("sglang.speculative.draft_model_path%s", strings.TrimPrefix(err.Error(), "model"))
		}
	}
	return ParsePlan(data, "")
}

// SealedModel refuses a plan's "model" that would be read from a file or
// the network: a hub id, a config.json's path or a checkpoint folder.
func SealedModel(raw json.RawMessage) error {
	const how = `here a model is read from its content alone: give a catalog name, the model's fields, or {"hf_config": {…}} with the config.json inline`
	raw = bytes.TrimSpace(raw)
	var name string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &name) == nil && IsHubRef(name) {
		return fmt.Errorf("model: %s needs the network; %s", name, how)
	}
	var keys map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &keys) != nil {
		return nil
	}
	if keys["checkpoint"] != nil {
		return fmt.Errorf("model.checkpoint: a folder is a path; %s", how)
	}
	if c := bytes.TrimSpace(keys["hf_config"]); len(c) > 0 && c[0] != '{' {
		return fmt.Errorf("model.hf_config: a path; %s", how)
	}
	return nil
}

// ParsePlan decodes a plan; dir is the plan's folder, against which a
// relative "hf_config" or "checkpoint" path is resolved.
func ParsePlan(data []byte, dir string) (Plan, error) {
	var raw planFile
	if err := strictDecode(data, &raw, ""); err != nil {
		return Plan{}, err
	}
	p := Plan{Name: raw.Name, GPU: raw.GPU}
	var err error
	if p.VLLM, err = decodeEngine[VLLM](raw.VLLM, raw.Inference, "vllm"); err != nil {
		return Plan{}, err
	}
	if err := p.VLLM.decodeDraft(dir); err != nil {
		return Plan{}, err
	}
	if p.SGLang, err = decodeEngine[SGLang](raw.SGLang, raw.Inference, "sglang"); err != nil {
		return Plan{}, err
	}
	if err := p.SGLang.decodeDraft(dir); err != nil {
		return Plan{}, err
	}
	if p.TGI, err = decodeEngine[TGI](raw.TGI, raw.Inference, "tgi"); err != nil {
		return Plan{}, err
	}
	if p.LlamaCpp, err = decodeEngine[LlamaCpp](raw.LlamaCpp, raw.Inference, "llama_cpp"); err != nil {
		return Plan{}, err
	}
	if p.Ollama, err = decodeEngine[Ollama](raw.Ollama, raw.Inference, "ollama"); err != nil {
		return Plan{}, err
	}
	m, ref, ck, err := DecodeModel(raw.Model, dir)
	if err != nil {
		return Plan{}, err
	}
	p.Model, p.ModelRef, p.Checkpoint = m, ref, ck
	switch {
	case len(raw.Post) > 0 && (len(raw.Train) > 0 || len(raw.Inference) > 0):
		return Plan{}, errors.New(`plan: a "post_training" plan holds its own training step ("policy"); give it without "train" or "inference"`)
	case len(raw.Post) > 0:
		pt, err := decodePostTraining(raw.Post, m)
		if err != nil {
			return Plan{}, err
		}
		p.PostTraining = pt
	case len(raw.Train) > 0 && len(raw.Inference) > 0:
		return Plan{}, errors.New(`plan: give "train" or "inference", not both`)
	case len(raw.Train) > 0:
		if hasKey(raw.Train, "model") {
			return Plan{}, errors.New(`train.model: the model goes at the top level of the plan ("model"), not inside "train"`)
		}
		var t Training
		if err := strictDecode(raw.Train, &t, "train."); err != nil {
			return Plan{}, err
		}
		t.Model = m
		if err := searchValidate(t, raw.Search); err != nil {
			return Plan{}, fmt.Errorf("train: %w", err)
		}
		p.Training = &t
	case len(raw.Inference) > 0:
		if hasKey(raw.Inference, "model") {
			return Plan{}, errors.New(`inference.model: the model goes at the top level of the plan ("model"), not inside "inference"`)
		}
		var in Inference
		if err := strictDecode(raw.Inference, &in, "inference."); err != nil {
			return Plan{}, err
		}
		in.Model = m
		if ck != nil {
			in = in.WithCheckpoint(*ck)
		}
		if err := in.Validate(); err != nil {
			return Plan{}, fmt.Errorf("inference: %w", err)
		}
		p.Inference = &in
	default:
		return Plan{}, errors.New(`plan: a "train", "inference" or "post_training" object is required`)
	}
	if err := p.ApplyVersions(raw.Versions); err != nil {
		return Plan{}, err
	}
	if err := p.decodeSearch(raw.Search); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// decodeEngine reads a serving engine's section of an inference plan
// (nil where the plan has none).
func decodeEngine[T any](raw, inference json.RawMessage, key string) (*T, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if len(inference) == 0 {
		return nil, fmt.Errorf(`%s: applies to an inference plan ("inference")`, key)
	}
	var v T
	if err := strictDecode(raw, &v, key+"."); err != nil {
		return nil, err
	}
	return &v, nil
}

// decodeSearch reads a plan's search object, if any.
func (p *Plan) decodeSearch(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if p.Training == nil {
		return errors.New(`search: a layout search lays out a training plan ("train")`)
	}
	var ss SearchSettings
	if err := strictDecode(raw, &ss, "search."); err != nil {
		return err
	}
	if ss.GPUs < 1 || ss.GPUs > 1<<20 || ss.GlobalBatch < 0 || ss.GlobalBatch > MaxTokens || ss.NetworkBandwidth < 0 || ss.HostMemory < 0 {
		return fmt.Errorf("search: gpus must be in [1, %d], global_batch in [1, %d], network_bandwidth and host_memory positive", 1<<20, MaxTokens)
	}
	p.Search = &ss
	return nil
}

// searchValidate validates a training plan; with a search, a micro_batch
// left out is the search's to choose, so the rest is validated at 1.
func searchValidate(t Training, search json.RawMessage) error {
	if len(search) > 0 && t.MicroBatch == 0 {
		t.MicroBatch = 1
	}
	return t.Validate()
}

// decodePostTraining reads a plan's post_training object; its policy is
// the plan's model m.
func decodePostTraining(raw json.RawMessage, m Model) (*PostTraining, error) {
	if hasKey(raw, "model") {
		return nil, errors.New(`post_training.model: the policy is the plan's model (top-level "model")`)
	}
	var pt PostTraining
	if err := strictDecode(raw, &pt, "post_training."); err != nil {
		return nil, err
	}
	pt.Policy.Model = m
	if err := pt.Validate(); err != nil {
		return nil, err
	}
	return &pt, nil
}

// DecodeModel reads a plan's "model": a catalog name or hub id (hf://), the
// model's fields as an object, {"hf_config": a config.json or the config
// itself} or {"checkpoint": a folder} (paths against dir). It returns the
// model, how the plan named it, and the checkpoint where one was read.
func DecodeModel(raw json.RawMessage, dir string) (Model, string, *Checkpoint, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Model{}, "", nil, fmt.Errorf(`plan: "model" is required: a catalog name (%s), an object, {"hf_config": "config.json"} or {"checkpoint": "folder"}`, strings.Join(Presets()[:5], ", ")+", …")
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return Model{}, "", nil, fmt.Errorf("model: %v", err)
		}
		if IsHubRef(name) {
			ck, err := openHub(name)
			if err != nil {
				return Model{}, "", nil, err
			}
			return ck.Model, name, &ck, nil
		}
		p, err := LookupPreset(name)
		if err != nil {
			return Model{}, "", nil, fmt.Errorf("model: %w", err)
		}
		return p.Model, name, nil, nil
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) == nil && keys["hf_config"] != nil {
		if inline := bytes.TrimSpace(keys["hf_config"]); len(inline) > 0 && inline[0] == '{' && len(keys) == 1 {
			m, err := FromHFConfig(inline) // the config.json itself, inline
			if err != nil {
				return Model{}, "", nil, fmt.Errorf("model.hf_config: %w", err)
			}
			return m, orDefault(m.Name, "the plan's config.json"), nil, nil
		}
		var ref struct {
			HFConfig string `json:"hf_config"`
		}
		if err := strictDecode(raw, &ref, "model."); err != nil {
			return Model{}, "", nil, fmt.Errorf(`%w (a model read from a config.json takes only "hf_config": the file's path, or the config itself as an object)`, err)
		}
		m, err := readHFConfig(dir, ref.HFConfig)
		if err != nil {
			return Model{}, "", nil, err
		}
		return m, ref.HFConfig, nil, nil
	}
	if keys["checkpoint"] != nil {
		var ref struct {
			Checkpoint string `json:"checkpoint"`
		}
		if err := strictDecode(raw, &ref, "model."); err != nil {
			return Model{}, "", nil, fmt.Errorf(`%w (a model read from a checkpoint folder takes only "checkpoint")`, err)
		}
		ck, err := readCheckpointIn(dir, ref.Checkpoint)
		if err != nil {
			return Model{}, "", nil, err
		}
		return ck.Model, ref.Checkpoint, &ck, nil
	}
	var m Model
	if err := strictDecode(raw, &m, "model."); err != nil {
		return Model{}, "", nil, err
	}
	if err := m.Validate(); err != nil {
		return Model{}, "", nil, err
	}
	return m, m.Name, nil, nil
}

// hasKey reports whether the JSON object data has key k.
func hasKey(data []byte, k string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return false
	}
	_, ok := obj[k]
	return ok
}

// readHFConfig reads the config.json a plan names: an absolute path, one
// under the user's home (~/…) or one beside the plan (in dir); a regular
// file of at most MaxConfigFile bytes.
func readHFConfig(dir, name string) (Model, error) {
	if name == "" {
		return Model{}, errors.New("model.hf_config: give the path of a config.json (absolute, ~/…, or beside the plan)")
	}
	path, err := userPath(dir, name)
	if err != nil {
		return Model{}, fmt.Errorf("model.hf_config: %v", err)
	}
	b, err := readFile(path, MaxConfigFile)
	if err != nil {
		return Model{}, fmt.Errorf("model.hf_config: %v", err)
	}
	m, err := FromHFConfig(b)
	if err != nil {
		return Model{}, fmt.Errorf("model.hf_config %s: %w", name, err)
	}
	return m, nil
}
