package answer

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/internal/jsonschema"
)

// The published schemas' ids, and the files that hold them beside this one
// (TestSchemaFiles keeps them equal to what Schema writes; plan -schema
// prints them).
const (
	PlanSchemaID   = "https://vramlab.dev/schema/plan.schema.json"
	ReportSchemaID = "https://vramlab.dev/schema/report.schema.json"
)

// Schema writes the JSON Schema (draft 2020-12) of a plan file ("plan")
// or of a Report ("report"), from the Go types that read and write them.
func Schema(which string) ([]byte, error) {
	var doc jsonschema.Schema
	var err error
	switch which {
	case "plan":
		doc, err = jsonschema.Generate(reflect.TypeFor[planFile](), jsonschema.Options{
			ID: PlanSchemaID, Title: "VRAM Lab plan", Overrides: overrides(true), Omit: planOmits, Extra: planExtra})
	case "report":
		doc, err = jsonschema.Generate(reflect.TypeFor[Report](), jsonschema.Options{
			ID: ReportSchemaID, Title: "VRAM Lab answer (plan -json)", Required: true, Overrides: overrides(false)})
	default:
		return nil, errUnknownSchema(which)
	}
	if err != nil {
		return nil, err
	}
	if which == "plan" {
		// ParsePlan: a model, and one of train, inference, post_training.
		doc["required"] = []any{"model"}
		doc["oneOf"] = []any{jsonschema.Schema{"required": []any{"train"}}, jsonschema.Schema{"required": []any{"inference"}},
			jsonschema.Schema{"required": []any{"post_training"}}}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

type errUnknownSchema string

func (e errUnknownSchema) Error() string {
	return "schema: " + string(e) + ` is not one of "plan", "report"`
}

// planFile is a plan file's top level as vram.ParsePlan reads it
// (TestPlanSchemaKeys holds its keys to vram.PlanKeys).
type planFile struct {
	Name         string               `json:"name,omitempty"`
	Model        modelRef             `json:"model"`
	Train        *vram.Training       `json:"train,omitempty"`
	Inference    *vram.Inference      `json:"inference,omitempty"`
	GPU          string               `json:"gpu,omitempty"`
	VLLM         *vram.VLLM           `json:"vllm,omitempty"`
	SGLang       *vram.SGLang         `json:"sglang,omitempty"`
	TGI          *vram.TGI            `json:"tgi,omitempty"`
	LlamaCpp     *vram.LlamaCpp       `json:"llama_cpp,omitempty"`
	Ollama       *vram.Ollama         `json:"ollama,omitempty"`
	PostTraining *vram.PostTraining   `json:"post_training,omitempty"`
	Versions     vram.Versions        `json:"versions,omitzero"`
	Search       *vram.SearchSettings `json:"search,omitempty"`
}

// planExtra are the $defs the plan's overrides refer to.
var planExtra = map[string]reflect.Type{
	"Model":       reflect.TypeFor[vram.Model](),
	"QuantFields": withField(reflect.TypeFor[vram.Quant]()),
}

// modelRef is a plan's "model" (vram.DecodeModel): described by override.
type modelRef struct{}

// planOmits are the fields a plan refuses where they sit: the model goes
// at the top level, never inside "train" or "inference" (ParsePlan), and
// a post-training plan's policy is the plan's model.
var planOmits = map[reflect.Type][]string{
	reflect.TypeFor[vram.Training]():  {"model"},
	reflect.TypeFor[vram.Inference](): {"model"},
}

// overrides describe the types that read or write themselves, each as its
// UnmarshalJSON reads it (input) or its MarshalJSON writes it (output).
func overrides(input bool) map[reflect.Type]any {
	dtype := jsonschema.Schema{"type": "string", "enum": append(toAny(vram.DTypeNames()), "unset")}
	bytes := jsonschema.Schema{"type": "integer", "description": "bytes"}
	if input {
		dtype = jsonschema.Schema{"type": "string", "description": "a dtype: " + strings.Join(vram.DTypeNames(), ", ") + " (unset: the default), or PyTorch's and safetensors' spellings (bfloat16, F8_E4M3)"}
		bytes = jsonschema.Schema{"anyOf": []any{bytes, jsonschema.Schema{"type": "string", "description": `a size such as "80 GiB"`}}}
	}
	o := map[reflect.Type]any{
		reflect.TypeFor[vram.Bytes]():      bytes,
		reflect.TypeFor[json.RawMessage](): jsonschema.Schema{"type": "object", "description": "a plan file (plan.schema.json)"},
		reflect.TypeFor[vram.ModelRef]():   modelSchema, // vllm.speculative_config.model, as written
		reflect.TypeFor[vram.DType]():      dtype,
		reflect.TypeFor[vram.BlockList]():  jsonschema.Schema{"type": "array", "items": jsonschema.Schema{"type": "integer", "minimum": 0}, "description": "block indexes"},
		reflect.TypeFor[vram.BiasMode](): jsonschema.Schema{"anyOf": []any{jsonschema.Schema{"type": "boolean"},
			jsonschema.Schema{"enum": []any{"mlp_only", "qkv_only", "attention", "true", "false"}}}},
		reflect.TypeFor[vram.DSSize](): jsonschema.Schema{"anyOf": []any{jsonschema.Schema{"type": "integer", "minimum": 0},
			jsonschema.Schema{"const": "auto"}}, "description": "a DeepSpeed size: elements, or \"auto\""},
		// Breakdown's MarshalJSON adds its total.
		reflect.TypeFor[vram.Breakdown](): withField(reflect.TypeFor[vram.Breakdown](), reflect.StructField{
			Name: "Total", Type: reflect.TypeFor[vram.Bytes](), Tag: `json:"total"`}),
	}
	if input {
		// Quant reads its fields, or a string naming the element type.
		o[reflect.TypeFor[vram.Quant]()] = jsonschema.Schema{"anyOf": []any{
			jsonschema.Schema{"$ref": "#/$defs/QuantFields"}, jsonschema.Schema{"type": "string", "description": "a dtype's name (\"nf4\")"}}}
		o[reflect.TypeFor[modelRef]()] = modelSchema
	}
	return o
}

// withField is t's fields plus fs, as a struct type to reflect.
func withField(t reflect.Type, fs ...reflect.StructField) reflect.Type {
	for i := range t.NumField() {
		fs = append(fs, t.Field(i))
	}
	return reflect.StructOf(fs)
}

// modelSchema is vram.DecodeModel's "model": a catalog name or hub id, the
// model's own fields, a config.json (a path, or the config inline), or a
// checkpoint folder.
var modelSchema = jsonschema.Schema{"oneOf": []any{
	jsonschema.Schema{"type": "string", "description": "a catalog name (plan -presets) or a hub id hf://org/name[@revision]"},
	jsonschema.Schema{"type": "object", "required": []any{"hf_config"}, "additionalProperties": false, "properties": jsonschema.Schema{
		"hf_config": jsonschema.Schema{"anyOf": []any{jsonschema.Schema{"type": "string", "description": "a config.json's path"},
			jsonschema.Schema{"type": "object", "description": "a Hugging Face config.json, inline"}}}}},
	jsonschema.Schema{"type": "object", "required": []any{"checkpoint"}, "additionalProperties": false, "properties": jsonschema.Schema{
		"checkpoint": jsonschema.Schema{"type": "string", "description": "a checkpoint folder (config.json and safetensors)"}}},
	jsonschema.Schema{"$ref": "#/$defs/Model"},
}}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
