package importer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// vLLM's recipes (vllm-project/recipes, models/ORG/NAME.yaml) describe a
// model's serving as model.model_id with model.base_args, variants (a
// quantized checkpoint's model_id and its extra_args) and optional
// features. The importer serves the default variant, or the one an
// override `variant=NAME` picks, with base_args and the variant's
// extra_args; features are the user's to add to the command.
func vllmRecipeCommand(imp *Imported, tree map[string]any, opt *Options) ([]string, error) {
	model, _ := tree["model"].(map[string]any)
	id, _ := model["model_id"].(string)
	if id == "" {
		return nil, fmt.Errorf("vLLM recipe: model.model_id: want the served model's hub id")
	}
	variant := "default"
	var rest []string
	for _, kv := range opt.Overrides {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "variant" {
			variant = v
		} else {
			rest = append(rest, kv)
		}
	}
	opt.Overrides = rest
	args, err := recipeArgs(model["base_args"], "model.base_args")
	if err != nil {
		return nil, err
	}
	variants, _ := tree["variants"].(map[string]any)
	v, ok := variants[variant].(map[string]any)
	if !ok && variant != "default" {
		return nil, fmt.Errorf("vLLM recipe: variant %q: the recipe has %s", variant, strings.Join(slices.Sorted(maps.Keys(variants)), ", "))
	}
	if mid, _ := v["model_id"].(string); mid != "" {
		id = mid
	}
	extra, err := recipeArgs(v["extra_args"], "variants."+variant+".extra_args")
	if err != nil {
		return nil, err
	}
	imp.Mapped = append(imp.Mapped, fmt.Sprintf("vLLM recipe, variant %s → vllm serve %s %s", variant, id, strings.Join(append(args, extra...), " ")))
	if features, _ := tree["features"].(map[string]any); len(features) > 0 {
		imp.Assumed = append(imp.Assumed, fmt.Sprintf("the recipe's features (%s) are not applied: add their args to a command to plan them", strings.Join(slices.Sorted(maps.Keys(features)), ", ")))
	}
	return append(append([]string{"vllm", "serve", id}, args...), extra...), nil
}

func recipeArgs(v any, field string) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("vLLM recipe: %s: want a list of arguments, got %s", field, strictjson.Kind(v))
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		switch x := e.(type) {
		case string:
			out = append(out, x)
		case int64, float64, bool:
			out = append(out, fmt.Sprint(x))
		default:
			return nil, fmt.Errorf("vLLM recipe: %s: want strings, has %s", field, strictjson.Kind(e))
		}
	}
	return out, nil
}
