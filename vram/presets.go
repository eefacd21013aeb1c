package vram

import (
	"fmt"
	"sort"
	"strings"
)

// Preset is a catalog model with the config it was taken from.
type Preset struct {
	Model  Model
	Source string // the Hugging Face config.json the shape comes from (or the transformers config class whose defaults it is)
}

func hf(id string) string { return "https://huggingface.co/" + id + "/blob/main/config.json" }

// presets is the catalog: each family's file registers its entries (family
// presets), each copying the shape fields of the cited config.json; Params,
// where set, is the published exact count that the tests check the tensor
// inventory against.
var presets = map[string]Preset{}

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
	return Preset{}, fmt.Errorf("unknown model preset %q%s (the catalog's %d names: vram.Presets(), or go run ./examples/plan -presets). %s",
		name, didYouMeanSameKind(name, Presets()), len(presets), describeUnknownModel(name))
}

// describeUnknownModel says how to describe a model the catalog lacks.
func describeUnknownModel(name string) string {
	hub := "hf://ORG/NAME"
	if strings.Count(name, "/") == 1 && !strings.HasPrefix(name, "/") {
		hub = "hf://" + name
	}
	return fmt.Sprintf(`A model the catalog lacks is read from what describes it: its config.json ({"hf_config": "path/to/config.json"}, or the config itself as the value), `+
		`its checkpoint folder ({"checkpoint": "path/to/folder"}: config.json and the safetensors headers), the hub ("%s": config.json and headers by range requests, cached for offline use), `+
		`or the model's fields as an object ({"family": "llama", "layers": 32, …}: vram.Model)`, hub)
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
