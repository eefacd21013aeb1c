package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
	"github.com/vramlab/vramlab/vram/internal/strictjson"
	"github.com/vramlab/vramlab/vram/internal/toml"
	"github.com/vramlab/vramlab/vram/internal/yaml"
)

// Kind is the kind of config an import read.
type Kind string

const (
	KindAxolotl      Kind = "axolotl"
	KindLLaMAFactory Kind = "llamafactory"
	KindTorchtune    Kind = "torchtune"
	KindTorchtitan   Kind = "torchtitan"
	KindTorchtitanPy Kind = "torchtitan_py" // a config_registry.py's function (torchtitan_py.go)
	KindHFArgs       Kind = "hf_trainer"
	KindMegatron     Kind = "megatron"
	KindDeepSpeed    Kind = "deepspeed"
	KindAccelerate   Kind = "accelerate"
	KindVLLM         Kind = "vllm"
	KindSGLang       Kind = "sglang"
	KindLlamaCpp     Kind = "llama.cpp"
	KindVerl         Kind = "verl" // main_ppo's Hydra overrides (verl.go)
)

// Kinds are the kinds a caller may name (Options.Kind).
func Kinds() []string {
	var out []string
	for _, k := range []Kind{KindAxolotl, KindLLaMAFactory, KindTorchtune, KindTorchtitan, KindHFArgs, KindMegatron,
		KindDeepSpeed, KindAccelerate, KindVerl, KindVLLM, KindSGLang, KindLlamaCpp} {
		out = append(out, string(k))
	}
	return out
}

// Project names the project whose config the kind is (torchtitan for
// its TOML and its Python configs alike).
func (k Kind) Project() string {
	if k == KindTorchtitanPy {
		return string(KindTorchtitan)
	}
	return string(k)
}

// Options is what a config leaves to the launch.
type Options struct {
	// Kind names the config's kind where its content does not say it
	// (the CLI's -from); empty recognises it.
	Kind Kind
	// Model overrides or supplies the model: a catalog name or Hugging
	// Face id the catalog has, a config.json, or a checkpoint folder.
	Model string
	GPU   string // the card (a catalog name or a capacity)
	GPUs  int    // the world size (torchrun's, accelerate's num_processes)
	// Entry is the function of a torchtitan config_registry.py to read
	// (torchtitan's --config; the CLI's -config).
	Entry string
	// Overrides are key=value settings after the config, as torchtune's
	// `tune run … key=value` takes them.
	Overrides []string
	// Dir is the folder relative paths in the config are read against
	// (a DeepSpeed config named by a trainer's); Read sets it. The
	// files a config names are read only inside it (the working
	// directory when empty), unless AnyPath.
	Dir     string
	AnyPath bool
	// Versions are the releases the run uses where the config cannot say
	// (TRL's, whose defaults fill what a GRPOConfig leaves unset); they
	// become the plan's versions.
	Versions vram.Versions
	// Sealed reads nothing but the config's content: no file it names, no
	// model from a path or the hub (the MCP server's imports). The model
	// comes from the catalog.
	Sealed bool
	// files are the files a launch script writes (here-documents), read
	// before Dir's.
	files map[string][]byte
}

// Imported is a plan read from a config, with what the reading did.
type Imported struct {
	Plan vram.Plan `json:"-"`
	Kind Kind      `json:"kind"`
	// Mapped says each field that became part of the plan, as
	// "sequence_len 4096 → seq_len 4096".
	Mapped []string `json:"mapped"`
	// NotModelled names fields that matter for memory and that the
	// engine does not model (the estimate leaves them out).
	NotModelled []string `json:"not_modelled,omitempty"`
	// Ignored lists fields that do not matter for GPU memory.
	Ignored []string `json:"ignored,omitempty"`
	// Assumed says what the import chose where neither the config nor
	// the options said (a serving plan's request, say).
	Assumed []string `json:"assumed,omitempty"`
}

// Read reads and imports a config file; the files it names (a
// DeepSpeed config) are read beside it.
func Read(path string, opt Options) (Imported, error) {
	data, err := fileio.Read(path, vram.MaxConfigFile)
	if err != nil {
		return Imported{}, err
	}
	if opt.Dir == "" {
		opt.Dir = filepath.Dir(path)
	}
	imp, err := Import(filepath.Base(path), data, opt)
	if err != nil {
		return imp, fmt.Errorf("%s: %w", path, err)
	}
	return imp, nil
}

// Import imports a config's content (name is its file name, whose
// extension helps tell YAML from TOML from a command line).
func Import(name string, data []byte, opt Options) (Imported, error) {
	kind := opt.Kind
	var tree map[string]any
	var args []string
	var err error
	if kind == "" {
		kind, tree, args, err = recognise(name, data, &opt)
	} else {
		tree, args, err = decodeAs(kind, data, &opt)
	}
	if err != nil {
		return Imported{}, err
	}
	if kind == KindTorchtitan && tree["_class"] != nil {
		kind = KindTorchtitanPy
	}
	if opt.Entry != "" && kind != KindTorchtitan && kind != KindTorchtitanPy {
		return Imported{Kind: kind}, fmt.Errorf("-config %s names a function of a torchtitan Python config; this config is %s's", opt.Entry, kind)
	}
	imp := Imported{Kind: kind}
	switch kind {
	case KindVLLM, KindSGLang, KindLlamaCpp:
		if tree != nil { // a vLLM recipe
			args, err = vllmRecipeCommand(&imp, tree, &opt)
		}
		if err == nil {
			err = importServe(&imp, kind, args, opt)
		}
	default:
		r := newConfigReader(kind, tree, &imp)
		if err = r.override(opt.Overrides); err == nil && kind == KindVerl {
			r.derived, err = yaml.Resolve(r.flat) // verl's YAML is OmegaConf's
		}
		if err == nil {
			err = importTrainer(r, opt)
		}
	}
	if err == nil && opt.Versions != (vram.Versions{}) {
		err = imp.Plan.ApplyVersions(opt.Versions)
	}
	if err != nil {
		return imp, fmt.Errorf("%s: %w", kind, err)
	}
	return imp, nil
}

// recognise tells the config's kind from its content: a launch script
// (or one command line) that serves or trains, else a YAML, TOML or JSON
// config.
func recognise(name string, data []byte, opt *Options) (Kind, map[string]any, []string, error) {
	text := strings.TrimSpace(string(data))
	ext := strings.ToLower(filepath.Ext(name))
	if isPythonConfig(name, text) {
		tree, err := torchtitanPyTree(data, *opt)
		return KindTorchtitan, tree, nil, err
	}
	if ext != ".yaml" && ext != ".yml" && ext != ".toml" && ext != ".json" {
		sc, err := parseScript(text)
		if over := (overBudget{}); errors.As(err, &over) {
			return "", nil, nil, err
		}
		if err == nil {
			if cmd, kind, trainer := sc.launchCommand(); kind != "" {
				opt.files = sc.files
				if trainer {
					if kind == KindVerl {
						tree, err := verlPrimaryConfig(verlTree(cmd), opt)
						return kind, tree, nil, err
					}
					if isMegatronCommand(cmd) {
						kind = KindMegatron
					}
					tree, err := argsTree(cmd)
					return kind, tree, nil, err
				}
				return kind, nil, cmd, nil
			}
		}
	}
	var tree map[string]any
	switch {
	case ext == ".toml":
		t, err := toml.Parse(data)
		if err != nil {
			return "", nil, nil, err
		}
		tree = t
	case ext == ".json" || strings.HasPrefix(text, "{"):
		if err := json.Unmarshal(data, &tree); err != nil {
			return "", nil, nil, fmt.Errorf("json: %v", err)
		}
	default:
		v, err := yaml.Parse(data)
		if err != nil {
			return "", nil, nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return "", nil, nil, fmt.Errorf("a config is a mapping of keys, this one is %s", strictjson.Kind(v))
		}
		tree = m
	}
	k := kindOf(tree)
	if k == "" {
		return "", nil, nil, fmt.Errorf("%s: not a config the importer knows (axolotl, LLaMA-Factory, torchtune, torchtitan, TrainingArguments, Megatron-LM, DeepSpeed, accelerate, verl, a vLLM recipe, or a vllm serve / launch_server / llama-server command); name it with -from", name)
	}
	return k, tree, nil, nil
}

// decodeAs reads data as a kind the user named.
func decodeAs(kind Kind, data []byte, opt *Options) (map[string]any, []string, error) {
	switch kind {
	case KindVLLM, KindSGLang, KindLlamaCpp:
		sc, err := parseScript(string(data))
		if err != nil {
			return nil, nil, err
		}
		opt.files = sc.files
		if cmd, k, _ := sc.launchCommand(); k == kind {
			return nil, cmd, nil
		}
		if len(sc.commands) == 0 {
			return nil, nil, fmt.Errorf("no command")
		}
		return nil, sc.commands[len(sc.commands)-1], nil
	case KindTorchtitan, KindTorchtitanPy:
		if kind == KindTorchtitanPy || isPythonConfig("", strings.TrimSpace(string(data))) {
			t, err := torchtitanPyTree(data, *opt)
			return t, nil, err
		}
		t, err := toml.Parse(data)
		return t, nil, err
	case KindHFArgs, KindDeepSpeed, KindMegatron:
		text := strings.TrimSpace(string(data))
		if !strings.HasPrefix(text, "{") {
			sc, err := parseScript(text)
			if err != nil {
				return nil, nil, err
			}
			cmd, _, _ := sc.launchCommand()
			if cmd == nil && len(sc.commands) > 0 {
				cmd = sc.commands[len(sc.commands)-1]
			}
			t, err := argsTree(cmd)
			return t, nil, err
		}
		var t map[string]any
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, nil, fmt.Errorf("json: %v", err)
		}
		return t, nil, nil
	case KindVerl:
		if sc, err := parseScript(string(data)); err == nil {
			if cmd, k, _ := sc.launchCommand(); k == KindVerl {
				tree, err := verlPrimaryConfig(verlTree(cmd), opt)
				return tree, nil, err
			}
		}
		v, err := yaml.Parse(data)
		if err != nil {
			return nil, nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("a config is a mapping of keys, this one is %s", strictjson.Kind(v))
		}
		return m, nil, nil
	case KindAxolotl, KindLLaMAFactory, KindTorchtune, KindAccelerate:
		v, err := yaml.Parse(data)
		if err != nil {
			return nil, nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("a config is a mapping of keys, this one is %s", strictjson.Kind(v))
		}
		return m, nil, nil
	}
	return nil, nil, fmt.Errorf("-from %q: want one of %s", kind, strings.Join(Kinds(), ", "))
}

// kindOf recognises a decoded config by the keys its project uses.
func kindOf(t map[string]any) Kind {
	has := func(k string) bool { _, ok := t[k]; return ok }
	switch {
	case has("actor_rollout_ref"):
		return KindVerl // verl's ppo_trainer.yaml and its kin
	case has("meta") && has("model") && has("variants"):
		return KindVLLM // a vLLM recipe (vllm-project/recipes models/ORG/NAME.yaml)
	case has("zero_optimization") || has("train_micro_batch_size_per_gpu") && !has("per_device_train_batch_size"):
		return KindDeepSpeed
	case has("compute_environment") || has("distributed_type") && has("num_processes"):
		return KindAccelerate
	case has("job") && has("training") || has("model") && has("parallelism"):
		return KindTorchtitan
	case has("base_model") || has("micro_batch_size") && has("sequence_len"):
		return KindAxolotl
	case has("model_name_or_path") && (has("stage") || has("finetuning_type") || has("cutoff_len")),
		has("model") && (has("peft_config") || has("dist_config") || has("quant_config") || has("cutoff_len") && has("micro_batch_size")):
		return KindLLaMAFactory // v0, or the v1 schema (src/llamafactory/v1/config)
	case containsComponent(t):
		return KindTorchtune
	case has("per_device_train_batch_size") || has("model_name_or_path"):
		return KindHFArgs
	}
	return ""
}

func containsComponent(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["_component_"]; ok {
			return true
		}
		for _, e := range x {
			if containsComponent(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if containsComponent(e) {
				return true
			}
		}
	}
	return false
}

// configReader reads a config's fields by dotted key, checking types,
// and records what each became.
type configReader struct {
	kind Kind
	flat map[string]any
	used map[string]bool
	imp  *Imported
	// derived are keys whose value was an interpolation of another's
	// (OmegaConf's, yaml.Resolve): the key they follow is read in their
	// stead.
	derived map[string]bool
}

func newConfigReader(kind Kind, tree map[string]any, imp *Imported) *configReader {
	r := &configReader{kind: kind, flat: map[string]any{}, used: map[string]bool{}, imp: imp, derived: map[string]bool{}}
	flatten("", tree, r.flat)
	return r
}

// flatten writes nested mappings as dotted keys; lists stay values. A key
// whose own name holds a dot (`"training.seq_len" = 131072` in TOML, such
// a YAML or JSON key) is one key to every project the importer reads —
// TOML's quoted keys, OmegaConf's and Python's dicts — not a path to the
// nested key: it is written quoted (strconv.Quote, as are keys holding a
// quote), so no reader takes it for [training] seq_len, and the unread
// keys name it as written.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 && prefix != "" {
		out[prefix] = v
		return
	}
	for k, e := range m {
		key := k
		if strings.ContainsAny(k, `."`) {
			key = strconv.Quote(k)
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		flatten(key, e, out)
	}
}

// splitPath splits a dotted key at the dots outside its quoted parts,
// unquoting them (flatten's inverse).
func splitPath(key string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, key[start:i])
			start = i + 1
		}
	}
	parts = append(parts, key[start:])
	for i, p := range parts {
		if u, err := strconv.Unquote(p); err == nil && strings.HasPrefix(p, `"`) {
			parts[i] = u
		}
	}
	return parts
}

// setPath sets the value at a dotted path in a nested mapping, making the
// mappings on the way (a value in the way is replaced, as a later
// override replaces it).
func setPath(m map[string]any, path string, v any) {
	parts := splitPath(path)
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// merge writes over's values into base, mapping by mapping.
func merge(base, over map[string]any) {
	for k, v := range over {
		sub, isMap := v.(map[string]any)
		if dst, ok := base[k].(map[string]any); ok && isMap {
			merge(dst, sub)
			continue
		}
		base[k] = v
	}
}

// unflatten rebuilds the nested mapping flatten made (or one of paths, a
// command line's key=value overrides), in the keys' order, so that a
// value and a path beneath it ("a" and "a.b") resolve alike every run.
func unflatten(flat map[string]any) map[string]any {
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]any{}
	for _, k := range keys {
		setPath(out, k, flat[k])
	}
	return out
}

// override applies key=value settings (torchtune's CLI overrides; a
// leading ~ removes a key).
func (r *configReader) override(kvs []string) error {
	for _, kv := range kvs {
		if strings.HasPrefix(kv, "~") {
			delete(r.flat, kv[1:])
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("override %q: want key=value", kv)
		}
		r.flat[strings.TrimSpace(k)] = yaml.Scalar(strings.TrimSpace(v))
	}
	return nil
}

func (r *configReader) has(key string) bool {
	v, ok := r.flat[key]
	return ok && v != nil
}

func (r *configReader) get(key string) (any, bool) {
	v, ok := r.flat[key]
	if ok {
		r.used[key] = true
	}
	return v, ok && v != nil
}

// str reads a string field ("" and false when absent).
func (r *configReader) str(key string) (string, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return "", false, nil
	}
	switch x := v.(type) {
	case string:
		return x, true, nil
	case bool, int64, float64:
		return fmt.Sprint(x), true, nil
	}
	return "", false, fmt.Errorf("%s: want a string, got %s", key, strictjson.Kind(v))
}

// fraction reads a share of the GPU in (0, 1] (0 when absent): an
// explicit 0 is not the default, and is refused for why.
func (r *configReader) fraction(key, why string) (float64, error) {
	f, ok, err := r.floatInOK(key, 0, 1)
	if ok && f == 0 {
		return 0, fmt.Errorf("%s: 0 %s; leave the key out for the default", key, why)
	}
	return f, err
}

// floatIn reads a number within [lo, hi] (0 when absent).
func (r *configReader) floatIn(key string, lo, hi float64) (float64, error) {
	f, _, err := r.floatInOK(key, lo, hi)
	return f, err
}

// floatInOK reads a number within [lo, hi], and whether the config has it.
func (r *configReader) floatInOK(key string, lo, hi float64) (float64, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return 0, false, nil
	}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case string:
		switch n := yaml.Scalar(x).(type) {
		case int64:
			f = float64(n)
		case float64:
			f = n
		default:
			return 0, false, fmt.Errorf("%s: want a number, got %q", key, x)
		}
	default:
		return 0, false, fmt.Errorf("%s: want a number, got %s", key, strictjson.Kind(v))
	}
	if math.IsNaN(f) || f < lo || f > hi {
		return 0, false, fmt.Errorf("%s = %v: want a number in [%v, %v]", key, v, lo, hi)
	}
	return f, true, nil
}

// int reads a whole-number field within [lo, hi].
// intInto sets *dst to the key's whole number in [lo, hi] when the config
// has the key, and leaves it as it is when not.
func (r *configReader) intInto(dst *int, key string, lo, hi int) error {
	n, ok, err := r.int(key, lo, hi)
	if ok && err == nil {
		*dst = n
	}
	return err
}

func (r *configReader) int(key string, lo, hi int) (int, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return 0, false, nil
	}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case string:
		if n, ok := yaml.Scalar(x).(int64); ok {
			f = float64(n)
		} else {
			return 0, false, fmt.Errorf("%s: want a whole number, got %q", key, x)
		}
	default:
		return 0, false, fmt.Errorf("%s: want a whole number, got %s", key, strictjson.Kind(v))
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, false, fmt.Errorf("%s = %v: want a whole number in [%d, %d]", key, v, lo, hi)
	}
	return int(f), true, nil
}

// bool reads a boolean field; strings "true"/"false" (and YAML's yes/no)
// count.
func (r *configReader) bool(key string) (bool, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return false, false, nil
	}
	switch x := v.(type) {
	case bool:
		return x, true, nil
	case string:
		if b, ok := yaml.Scalar(strings.TrimSpace(x)).(bool); ok {
			return b, true, nil
		}
	}
	return false, false, fmt.Errorf("%s: want true or false, got %v", key, v)
}

// list reads a list of strings (a single string is a list of one).
func (r *configReader) list(key string) ([]string, bool, error) {
	v, ok := r.get(key)
	if !ok {
		return nil, false, nil
	}
	switch x := v.(type) {
	case string:
		return []string{x}, true, nil
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("%s: want a list of strings, has %s", key, strictjson.Kind(e))
			}
			out = append(out, s)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%s: want a list of strings, got %s", key, strictjson.Kind(v))
}

// hasPrefix reports whether the config has a field under prefix.
func (r *configReader) hasPrefix(prefix string) bool {
	for k := range r.flat {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// ignore marks a field read and without effect here (finish lists it as
// ignored).
func (r *configReader) ignore(key string) {
	if _, ok := r.flat[key]; ok {
		r.used[key] = true
		r.imp.Ignored = append(r.imp.Ignored, key)
	}
}

// ignorePrefix marks every field under prefix ignored.
func (r *configReader) ignorePrefix(prefix string) {
	for k := range r.flat {
		if strings.HasPrefix(k, prefix) && !r.used[k] {
			r.ignore(k)
		}
	}
}

func (r *configReader) mapped(format string, a ...any) {
	r.imp.Mapped = append(r.imp.Mapped, fmt.Sprintf(format, a...))
}

// notModelled records a field (or the fields under a mapping key) that
// matters for memory and is left out.
func (r *configReader) notModelled(key, why string) {
	if v, ok := r.get(key); ok {
		if off, isBool := v.(bool); isBool && !off { // a feature switched off changes nothing
			r.ignore(key)
			return
		}
		r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %v: %s", key, v, why))
		return
	}
	for k, v := range r.flat {
		if strings.HasPrefix(k, key+".") && !r.used[k] {
			r.used[k] = true
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %v: %s", k, v, why))
		}
	}
}

// notModelledPast records a whole-number field past off (1: a degree of
// one does nothing) as not modelled, and ignores it at off.
func (r *configReader) notModelledPast(key string, off int64, why string) {
	if v, ok := r.get(key); ok {
		if n, isInt := v.(int64); isInt && n <= off {
			r.ignore(key)
			return
		}
	}
	r.notModelled(key, why)
}

// finish lists every field not read: known ones as ignored, the rest as
// not read (so nothing the config says is dropped without a word).
func (r *configReader) finish(irrelevant func(string) bool) {
	var rest []string
	for k := range r.flat {
		if !r.used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		switch {
		case strings.Contains(k, `"`) && slices.ContainsFunc(splitPath(k), func(p string) bool { return strings.Contains(p, ".") }):
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %v: a key whose name holds a dot is one key to %s, not the nested %s: not read",
				k, r.flat[k], r.kind.Project(), strings.Join(splitPath(k), ".")))
		case irrelevant(k):
			r.imp.Ignored = append(r.imp.Ignored, k)
		default:
			r.imp.NotModelled = append(r.imp.NotModelled, fmt.Sprintf("%s = %v: not read by the importer (it may change memory)", k, r.flat[k]))
		}
	}
	sort.Strings(r.imp.NotModelled)
	sort.Strings(r.imp.Ignored)
}

// importModel resolves the model: the -model option, else the config's
// hub id from the catalog.
func importModel(id string, opt Options) (vram.Model, string, *vram.Checkpoint, error) {
	ref := opt.Model
	if ref == "" {
		ref = id
	}
	if ref == "" {
		return vram.Model{}, "", nil, fmt.Errorf("the config names no model: give -model (a catalog name, a config.json, a checkpoint folder or hf://org/name)")
	}
	var raw json.RawMessage
	switch {
	case opt.Sealed:
		raw, _ = json.Marshal(ref)
		if vram.IsHubRef(ref) || strings.HasSuffix(ref, ".json") || strings.ContainsAny(ref, `\`) || strings.HasPrefix(ref, ".") || strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "~") {
			return vram.Model{}, "", nil, fmt.Errorf("model %q: a path or hub id is not read here, only catalog models (plan -presets lists them) and the hub ids the catalog knows", ref)
		}
	case strings.HasSuffix(ref, ".json"):
		raw, _ = json.Marshal(map[string]string{"hf_config": ref})
	case isDir(ref, opt.Dir):
		raw, _ = json.Marshal(map[string]string{"checkpoint": ref})
	default:
		raw, _ = json.Marshal(ref)
	}
	m, name, ck, err := vram.DecodeModel(raw, opt.Dir)
	if err != nil && opt.Model == "" {
		if p, key, ok := presetByRepoName(id); ok {
			return p.Model, key, nil, nil
		}
		if strings.Contains(err.Error(), "unknown model preset") {
			return m, name, ck, fmt.Errorf("the config's model %q is not in the catalog (plan -presets lists it): give -model (a catalog name, a config.json, a checkpoint folder, or hf://%s to read its config and headers from the hub)", id, id)
		}
		return m, name, ck, err
	}
	return m, name, ck, err
}

// presetByRepoName finds the catalog model a hub id names by its
// repository's name alone, the way copies and post-trained releases keep
// the base's name: an organisation's mirror (NousResearch/Meta-Llama-3-8B),
// an -Instruct, -chat or -it release, an -hf or -fp16 export. The
// architecture is the base's; the estimate's model line names which.
func presetByRepoName(id string) (vram.Preset, string, bool) {
	want := normRepo(id)
	if want == "" {
		return vram.Preset{}, "", false
	}
	for _, key := range vram.Presets() {
		p, err := vram.LookupPreset(key)
		if err != nil {
			continue
		}
		if normRepo(key) == want || normRepo(p.Model.Name) == want {
			return p, key, true
		}
	}
	return vram.Preset{}, "", false
}

// repoQuant reads the quantization a pre-quantized release's name says
// when the catalog supplied its base's architecture: GPTQ, AWQ, INT4 and
// W4A16 store int4 in groups of 128 (AutoGPTQ's and AutoAWQ's default
// group_size), FP8 stores float8 e4m3 (its per-channel or per-tensor
// scales are a rounding error), INT8, W8A8 and W8A16 store int8. The
// checkpoint's own quantization_config is exact: -model its folder.
func repoQuant(id string) (vram.Quant, bool) {
	up := strings.ToUpper(id[strings.LastIndex(id, "/")+1:])
	has := func(subs ...string) bool {
		for _, x := range subs {
			if strings.Contains(up, x) {
				return true
			}
		}
		return false
	}
	switch {
	case has("GPTQ", "AWQ", "INT4", "W4A16", "4BIT"):
		return vram.Quant{DType: vram.INT4, GroupSize: 128}, true
	case has("FP8"):
		return vram.Quant{DType: vram.FP8E4M3}, true
	case has("INT8", "W8A8", "W8A16", "8BIT"):
		return vram.Quant{DType: vram.INT8}, true
	}
	return vram.Quant{}, false
}

func normRepo(id string) string {
	s := strings.ToLower(id[strings.LastIndex(id, "/")+1:])
	s = strings.TrimPrefix(s, "meta-")
	for changed := true; changed; {
		changed = false
		for _, suf := range []string{"-instruct", "-chat", "-it", "-hf", "-fp16", "-bf16", "-base", "-pt", "-v0.1", "-gptq", "-awq", "-int4", "-int8", "-fp8",
			"-w4a16", "-w8a8", "-w8a16", "-quantized.w8a8", "-quantized.w4a16", "-awq-int4", "-gptq-int4", "-gptq-int8", "-bnb-4bit", "-4bit", "-8bit"} {
			if strings.HasSuffix(s, suf) {
				s, changed = strings.TrimSuffix(s, suf), true
			}
		}
		// a release date (Qwen3-4B-Instruct-2507)
		if i := strings.LastIndexByte(s, '-'); i > 0 && len(s)-i == 5 && strings.Trim(s[i+1:], "0123456789") == "" {
			s, changed = s[:i], true
		}
	}
	return s
}

// readFile reads a file a config names: one the launch script wrote,
// else the file beside the config.
func (o Options) readFile(name string) ([]byte, error) {
	if data, ok := o.files[name]; ok {
		return data, nil
	}
	if o.Sealed {
		return nil, errors.New("a file the config names is not read here: only the config's content is (pass the settings in the config itself)")
	}
	p, err := o.confine(name)
	if err != nil {
		return nil, err
	}
	return fileio.Read(p, vram.MaxConfigFile)
}

// confine resolves a path a config names inside the config's folder (Dir,
// else the working directory), links followed: a downloaded config may
// name ../../x or /etc/passwd, and the importer reads neither unless the
// user said AnyPath.
func (o Options) confine(name string) (string, error) {
	root := o.Dir
	if root == "" {
		root = "."
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	if o.AnyPath {
		return p, nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	realRoot, _ = filepath.Abs(realRoot)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("no such file beside the config")
	}
	real, _ = filepath.Abs(real)
	if rel, err := filepath.Rel(realRoot, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is outside the config's folder %s: the importer reads only the files beside a config unless told to read anywhere (the CLI's -read-anywhere)", name, root)
	}
	return real, nil
}

// namedFileErr reports a file a config names that does not parse by its
// line only: the file may be anything the config pointed at, and its
// content is never quoted.
func namedFileErr(what, file string, err error) error {
	at := ""
	if m := lineOf.FindString(err.Error()); m != "" {
		at = " at " + m
	}
	return fmt.Errorf("%s %s: not a config the importer reads (it does not parse%s)", what, file, at)
}

var lineOf = regexp.MustCompile(`line \d+`)

func isDir(path, dir string) bool {
	p := path
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// IsPlan reports whether data is a VRAM Lab plan (a JSON object of the
// plan's own keys, with a model), not a config to import.
func IsPlan(data []byte) bool {
	return isPlan(data)
}

// Open reads whatever names a run: a plan file, or a trainer's config
// or a launch script, imported with opt (nil Imported for a plan file).
// opt.GPU, when set, is the plan's GPU either way.
func Open(path string, opt Options) (vram.Plan, *Imported, error) {
	data, err := fileio.Read(path, vram.MaxConfigFile)
	if err != nil {
		return vram.Plan{}, nil, err
	}
	var p vram.Plan
	var imp *Imported
	if opt.Kind == "" && IsPlan(data) {
		if p, err = vram.ReadPlan(path); err != nil {
			return p, nil, err
		}
	} else {
		x, err := Read(path, opt)
		if err != nil {
			return p, nil, err
		}
		p, imp = x.Plan, &x
	}
	if opt.GPU != "" {
		p.GPU = opt.GPU
	}
	return p, imp, nil
}

func isPlan(data []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(data, &keys) != nil || keys["model"] == nil {
		return false
	}
	for k := range keys {
		if !slices.Contains(vram.PlanKeys(), k) {
			return false
		}
	}
	return true
}

// orDefault is s, or def when s is empty.
func orDefault[S ~string](s, def S) S {
	if s == "" {
		return def
	}
	return s
}
