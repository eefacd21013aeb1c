package importer

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// verl's own defaults, its generated reference of ppo_trainer.yaml
// (verl_defaults.yaml): a verl YAML is often that file with a few keys
// changed, so the keys still at their defaults are told apart from the
// user's own settings, as a command line's overrides are.

//go:embed verl_defaults.yaml
var verlDefaultsYAML []byte

var verlDefaults = sync.OnceValue(func() map[string]any {
	tree, err := yaml.Parse(verlDefaultsYAML)
	if err != nil {
		panic(fmt.Sprintf("verl_defaults.yaml: %v", err)) // the embedded file, which TestVerlDefaultsYAML reads
	}
	r := newConfigReader(KindVerl, tree.(map[string]any), &Imported{})
	if r.derived, err = yaml.Resolve(r.flat); err != nil {
		panic(fmt.Sprintf("verl_defaults.yaml: %v", err))
	}
	return r.flat
})

// dropVerlDefaults removes the keys the import has not read whose values
// are verl's defaults, or follow another key (${…}), and says how many:
// what a command line leaves unsaid.
func (r *configReader) dropVerlDefaults() {
	n, follow := 0, 0
	for k, v := range r.flat {
		switch d, ok := verlDefaults()[k]; {
		case r.used[k]:
		case r.derived[k]:
			delete(r.flat, k)
			follow++
		case ok && fmt.Sprint(d) == fmt.Sprint(v):
			delete(r.flat, k)
			n++
		}
	}
	if n > 0 {
		r.mapped("%d keys at verl's own defaults (verl_defaults.yaml, b178a3cd) → as verl's defaults", n)
	}
	if follow > 0 {
		r.mapped("%d keys that follow others (${…}) → as the keys they follow", follow)
	}
}
