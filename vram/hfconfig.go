package vram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/vramlab/vramlab/vram/internal/strictjson"
)

// FromHFConfig reads a Hugging Face config.json (the keys that
// transformers' configuration_<family>.py defines) into a Model: the family
// named by model_type reads its own keys (its fromConfig). An unsupported
// model_type, or a missing or malformed shape key, is an error that names
// it.
func FromHFConfig(data []byte) (Model, error) {
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		return Model{}, fmt.Errorf("config.json: %v", err)
	}
	mt, _ := c["model_type"].(string)
	top := hfReader{c: c}
	arch := top.architecture()
	top.checkDType()
	if top.err != nil {
		return Model{}, fmt.Errorf("config.json: %v", top.err)
	}
	if mt == "" {
		return Model{}, fmt.Errorf("config.json: no \"model_type\"; supported: %s", strings.Join(Families(), ", "))
	}
	rel := top.release()
	if top.err != nil {
		return Model{}, fmt.Errorf("config.json: %v", top.err)
	}
	f := lookupFamily(mt)
	for _, g := range families {
		if f == nil && slices.Contains(g.aliases, mt) {
			f, mt = g, g.name
		}
	}
	if f == nil {
		// A wrapper (an image-text model, say) whose config holds a
		// family's config under a key.
		for _, g := range families {
			if key, ok := g.wrappers[mt]; ok {
				inner, ok := c[key].(map[string]any)
				if !ok {
					return Model{}, fmt.Errorf("config.json: model_type %q keeps its %s model's config under %q, which is missing", mt, g.name, key)
				}
				if n, ok := c["_name_or_path"]; ok {
					inner["_name_or_path"] = n
				}
				c, f, mt = inner, g, g.name
				break
			}
		}
	}
	if f == nil || f.fromConfig == nil {
		return Model{}, unsupportedModelType("config.json", mt)
	}
	r := hfReader{c: c}
	m := Model{Family: mt}
	if n, ok := c["_name_or_path"].(string); ok {
		m.Name = n
	}
	f.fromConfig(&r, &m)
	m.Release = rel
	if r.err == nil && arch != "" {
		r.headOf(arch, &m)
	}
	if r.err != nil {
		return Model{}, fmt.Errorf("config.json (model_type %q): %v", mt, r.err)
	}
	if err := m.Validate(); err != nil {
		if strings.HasSuffix(arch, "Classification") {
			return Model{}, fmt.Errorf("config.json: architectures names %s: %v", arch, err)
		}
		return Model{}, fmt.Errorf("config.json: %v", err)
	}
	return m, nil
}

// architecture reads the first class of config.architectures (what the
// checkpoint was saved as), or "".
func (r *hfReader) architecture() string {
	l := r.optList("architectures")
	if len(l) == 0 {
		return ""
	}
	s, ok := l[0].(string)
	if !ok {
		r.fail(fmt.Sprintf("architectures[0] must be a class name, got %s", strictjson.Kind(l[0])))
	}
	return s
}

// headOf sets m's head from its architecture class, the way transformers'
// task classes add one: a sequence or image classifier of num_labels
// classes where the class says so (and the family models one), the
// family's own head otherwise, with a note where the class has another. A
// task head the engine does not model is an error, never dropped silently.
func (r *hfReader) headOf(arch string, m *Model) {
	task := arch
	if i := strings.LastIndex(arch, "For"); i > 0 {
		task = arch[i:]
	} else if strings.HasSuffix(arch, "LMHeadModel") {
		task = "ForCausalLM"
	} else if strings.HasSuffix(arch, "Model") {
		task = "Model"
	}
	own := m.Normalize().Head
	switch task {
	case "ForSequenceClassification", "ForImageClassification":
		kind := map[string]string{"ForSequenceClassification": "seq_cls", "ForImageClassification": "image_cls"}[task]
		bare := *m
		bare.Head = "none"
		m.Head = fmt.Sprintf("%s_%d", kind, r.numLabels())
		if m.Validate() == nil && m.ParamCount() == bare.ParamCount() {
			r.fail(fmt.Sprintf("architectures names %s: a %s head is not modelled for family %s", arch, kind, m.Family))
		}
	case "ForCausalLM", "ForConditionalGeneration", "ForMaskedLM":
		if own != "lm" {
			m.note("config.json", fmt.Sprintf("architectures names %s: modelled as the bare %s encoder (head %q), without its language-model head", arch, m.Family, own))
		}
	case "Model":
		if own == "lm" {
			m.note("config.json", fmt.Sprintf("architectures names %s (no head): modelled with the language-model head of %s's causal-LM class", arch, m.Family))
		}
	default:
		r.fail(fmt.Sprintf("architectures names %s: its %s head is not modelled (VRAM Lab models %s with head %q; describe the model inline to choose another head)", arch, strings.TrimPrefix(task, "For"), m.Family, own))
	}
}

// numLabels is the classes of a task head: id2label's size, else
// num_labels, else PretrainedConfig's default of 2.
func (r *hfReader) numLabels() int {
	if v, ok := r.c["id2label"]; ok && v != nil {
		l, ok := v.(map[string]any)
		if !ok {
			r.fail(fmt.Sprintf("%q must be an object, got %s", "id2label", strictjson.Kind(v)))
			return 2
		}
		return len(l)
	}
	return r.optInt("num_labels", 2)
}

// checkDType checks config.torch_dtype (dtype since transformers 4.56): the
// dtype the checkpoint stores its floating-point weights in.
func (r *hfReader) checkDType() {
	for _, key := range []string{"torch_dtype", "dtype"} {
		s := r.optString(key, "")
		if s == "" || r.err != nil {
			continue
		}
		switch strings.TrimPrefix(s, "torch.") {
		case "float32", "float16", "bfloat16", "float64", "auto":
		default:
			r.fail(fmt.Sprintf("%s %q: want float32, float16 or bfloat16 (or float64)", key, s))
		}
	}
}

// hfReader reads keys from a decoded config, keeping the first error.
type hfReader struct {
	c   map[string]any
	err error
}

// common reads the keys most configurations share, under LlamaConfig's
// names.
func (r *hfReader) common(m *Model) {
	m.Layers = r.int("num_hidden_layers")
	m.Hidden = r.int("hidden_size")
	m.Heads = r.int("num_attention_heads")
	m.KVHeads = r.optInt("num_key_value_heads", m.Heads)
	m.FFN = r.int("intermediate_size")
	m.Vocab = r.int("vocab_size")
	m.MaxPosition = r.optInt("max_position_embeddings", 0)
	m.HeadDim = r.optInt("head_dim", 0)
}

// layerTypes reads config.layer_types ("full_attention",
// "sliding_attention", "chunked_attention" per layer), the way transformers
// releases since 4.53 spell out local and global layers, into m's
// GlobalEvery: every layer local, or global exactly when (i+1) is a
// multiple of a period. Other patterns are an error naming the key. A
// missing key leaves m as it is.
func (r *hfReader) layerTypes(m *Model) {
	raw := r.optList("layer_types")
	if raw == nil || r.err != nil {
		return
	}
	global := make([]bool, len(raw))
	locals := 0
	for i, t := range raw {
		switch t {
		case "full_attention":
			global[i] = true
		case "sliding_attention", "chunked_attention":
			locals++
		default:
			r.err = fmt.Errorf("layer_types[%d] = %s: want full_attention, sliding_attention or chunked_attention", i, strictjson.Kind(t))
			return
		}
	}
	if len(raw) != m.Layers {
		r.err = fmt.Errorf("layer_types lists %d layers for num_hidden_layers = %d", len(raw), m.Layers)
		return
	}
	switch {
	case locals == 0:
		m.SlidingWindow, m.AttentionChunk, m.GlobalEvery = 0, 0, 0
		return
	case locals == len(raw):
		m.GlobalEvery = 0
		return
	}
	for period := 2; period <= len(raw); period++ {
		fits := true
		for i := range global {
			if global[i] != ((i+1)%period == 0) {
				fits = false
				break
			}
		}
		if fits {
			m.GlobalEvery = period
			return
		}
	}
	r.err = fmt.Errorf("layer_types: local and global layers do not alternate with a fixed period (global where (i+1) %% period = 0); this pattern is not modelled")
}

// noRopePeriod reads config.no_rope_layers (1 where layer i applies the
// rotary embedding, 0 where it does not) as a period: layer i skips it iff
// (i+1) is a multiple of the period. A missing list takes interval (the
// config class builds the list from it); a list of ones is 0 (every layer
// rotates); any other pattern is an error naming the key.
func (r *hfReader) noRopePeriod(interval, layers int) int {
	raw := r.optList("no_rope_layers")
	if raw == nil || r.err != nil {
		return interval
	}
	if len(raw) != layers {
		r.err = fmt.Errorf("no_rope_layers lists %d layers for num_hidden_layers = %d", len(raw), layers)
		return 0
	}
	skip := make([]bool, len(raw))
	skips := 0
	for i, v := range raw {
		f, ok := v.(float64)
		if !ok || (f != 0 && f != 1) {
			r.err = fmt.Errorf("no_rope_layers[%d] = %s: want 1 (rotary) or 0 (none)", i, strictjson.Kind(v))
			return 0
		}
		skip[i] = f == 0
		if skip[i] {
			skips++
		}
	}
	if skips == 0 {
		return 0
	}
	for period := 1; period <= len(raw); period++ {
		fits := true
		for i := range skip {
			if skip[i] != ((i+1)%period == 0) {
				fits = false
				break
			}
		}
		if fits {
			return period
		}
	}
	r.err = fmt.Errorf("no_rope_layers: the layers without the rotary embedding are not every n-th layer; this pattern is not modelled")
	return 0
}

// perLayerInt reads key as one number or a list of one number per layer
// (Hunyuan's num_experts, moe_topk): a list whose entries differ is an
// error naming the key.
func (r *hfReader) perLayerInt(key string, def, layers int) int {
	l, ok := r.c[key].([]any)
	if !ok {
		return r.optInt(key, def)
	}
	if len(l) != layers {
		r.fail(fmt.Sprintf("%s lists %d layers for num_hidden_layers = %d", key, len(l), layers))
		return def
	}
	var first float64
	for i, v := range l {
		f, isNum := v.(float64)
		if !isNum || f != float64(int(f)) || (i > 0 && f != first) {
			r.fail(fmt.Sprintf("%s[%d] = %s: only one value for every layer is modelled", key, i, strictjson.Kind(v)))
			return def
		}
		first = f
	}
	if len(l) == 0 {
		return def
	}
	return int(first)
}

// fail records an error about the config (the first one wins).
func (r *hfReader) fail(msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s", msg)
	}
}

func (r *hfReader) int(key string) int {
	v, ok := r.c[key]
	if !ok || v == nil {
		if r.err == nil {
			r.err = fmt.Errorf("missing %q", key)
		}
		return 0
	}
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) || f < 0 || f > 1<<31 {
		if r.err == nil {
			r.err = fmt.Errorf("%q must be a non-negative integer, got %s", key, strictjson.Kind(v))
		}
		return 0
	}
	return int(f)
}

func (r *hfReader) optInt(key string, def int) int {
	if v, ok := r.c[key]; !ok || v == nil {
		return def
	}
	return r.int(key)
}

// optIntOrNone reads a count whose config class defaults to def when the
// key is missing and takes an explicit null as None (0): GLM-4.7-Flash's
// q_lora_rank, 768 by default, None for a plain q_proj.
func (r *hfReader) optIntOrNone(key string, def int) int {
	v, ok := r.c[key]
	switch {
	case !ok:
		return def
	case v == nil:
		return 0
	}
	return r.int(key)
}

// optIntNull reads a count whose config class defaults to def when the
// key is missing and replaces an explicit null with another value, null:
// BambaConfig's num_key_value_heads, 8 by default, num_attention_heads
// when None (configuration_bamba.py:55, 84-85).
func (r *hfReader) optIntNull(key string, def, null int) int {
	v, ok := r.c[key]
	switch {
	case !ok:
		return def
	case v == nil:
		return null
	}
	return r.int(key)
}

// optFloat reads a number; missing or null is def, anything else an error.
func (r *hfReader) optFloat(key string, def float64) float64 {
	v, ok := r.c[key]
	if !ok || v == nil {
		return def
	}
	f, ok := v.(float64)
	if !ok {
		r.fail(fmt.Sprintf("%q must be a number, got %s", key, strictjson.Kind(v)))
		return def
	}
	return f
}

// optBool reads a boolean; missing or null is def. A string such as "true"
// or a number is an error: reading it as false would silently change the
// model (tie_word_embeddings "true" adds a vocab × hidden matrix).
func (r *hfReader) optBool(key string, def bool) bool {
	v, ok := r.c[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		r.fail(fmt.Sprintf("%q must be true or false, got %s", key, strictjson.Kind(v)))
		return def
	}
	return b
}

// optString reads a string; missing or null is def.
func (r *hfReader) optString(key, def string) string {
	v, ok := r.c[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		r.fail(fmt.Sprintf("%q must be a string, got %s", key, strictjson.Kind(v)))
		return def
	}
	return s
}

// optList reads a list; missing or null is nil.
func (r *hfReader) optList(key string) []any {
	v, ok := r.c[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		r.fail(fmt.Sprintf("%q must be a list, got %s", key, strictjson.Kind(v)))
		return nil
	}
	return l
}

// HFConfig is the inverse of FromHFConfig: the config.json keys that make
// transformers build this architecture (used by the PyTorch companion tool,
// examples/measure, to build the same model on the meta device).
func (m Model) HFConfig() map[string]any {
	m = m.Normalize()
	c := map[string]any{"model_type": m.Family}
	if m.Name != "" {
		c["_name_or_path"] = m.Name
	}
	f := lookupFamily(m.Family)
	if m.Vision != nil {
		f = lookupFamily(m.Vision.Family) // the wrapper writes both parts
		c["model_type"] = m.Vision.Family
	}
	if f != nil && f.toConfig != nil {
		f.toConfig(m, c)
	}
	return c
}

// nested reads a wrapper's sub-config (text_config, vision_config) through
// the family its model_type names, def when it names none, as the
// wrapper's config class does; keys it leaves out take that family's
// config-class defaults (family.configDefaults).
func (r *hfReader) nested(key, def string) Model {
	sub, ok := r.sub(key)
	if !ok {
		return Model{}
	}
	mt, _ := sub["model_type"].(string)
	if mt == "" {
		mt = def
	}
	return r.readAs(key, sub, mt)
}

// nestedAs reads a sub-config through family fam whatever its model_type
// says (Qwen2.5-VL's vision_config calls itself qwen2_5_vl); key "" reads
// the wrapper's own keys (a flat config).
func (r *hfReader) nestedAs(key, fam string) Model {
	sub := r.c
	if key != "" {
		var ok bool
		if sub, ok = r.sub(key); !ok {
			return Model{}
		}
	}
	return r.readAs(key, sub, fam)
}

func (r *hfReader) sub(key string) (map[string]any, bool) {
	if r.err != nil {
		return nil, false
	}
	switch v := r.c[key].(type) {
	case nil:
		return map[string]any{}, true
	case map[string]any:
		return v, true
	default:
		r.fail(fmt.Sprintf("%q must be an object, got %v", key, v))
		return nil, false
	}
}

func (r *hfReader) readAs(key string, sub map[string]any, mt string) Model {
	where := key
	if where == "" {
		where = "config"
	}
	f := lookupFamily(mt)
	if f == nil || f.fromConfig == nil || f.vision != nil {
		r.fail(unsupportedModelType(where, mt).Error())
		return Model{}
	}
	c := make(map[string]any, len(sub)+len(f.configDefaults))
	for k, v := range f.configDefaults {
		c[k] = v
	}
	for k, v := range sub {
		// An explicit null reaches the family's reader (None, where its
		// class tells it from a missing key: Mistral's sliding_window),
		// except over a default listed here.
		if _, listed := f.configDefaults[k]; v != nil || !listed {
			c[k] = v
		}
	}
	sr := hfReader{c: c}
	sr.checkDType()
	m := Model{Family: mt}
	f.fromConfig(&sr, &m)
	if sr.err != nil {
		r.fail(fmt.Sprintf("%s (model_type %q): %v", where, mt, sr.err))
	}
	return m
}

// writeLayerTypes writes config.layer_types: local for m's local layers
// ("sliding_attention" or "chunked_attention"), "full_attention" for the
// others (the inverse of hfReader.layerTypes).
func writeLayerTypes(m Model, c map[string]any, local string) {
	types := make([]string, m.Layers)
	for i := range types {
		types[i] = "full_attention"
		if m.LocalLayer(i) {
			types[i] = local
		}
	}
	c["layer_types"] = types
}

// writeCommonConfig writes the keys most configurations share, under
// LlamaConfig's names.
func writeCommonConfig(m Model, c map[string]any) {
	c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"] = m.Layers, m.Hidden, m.Heads
	c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"] = m.KVHeads, m.FFN, m.Vocab
	c["tie_word_embeddings"] = m.TiedEmbeddings
	if m.MaxPosition > 0 {
		c["max_position_embeddings"] = m.MaxPosition
	}
	// Always written: some config classes default to a fixed width (Gemma
	// 256, Qwen3 128) rather than hidden / heads.
	c["head_dim"] = m.HeadDim
}

// layerKinds reads config.layer_types as a hybrid spells it — each layer
// attention (the word attention) or recurrent (the word other) — into the
// attention layers' indices; nil (and ok false) when the key is missing.
// Another word, or a list of the wrong length, is an error naming them.
func (r *hfReader) layerKinds(layers int, attention, other string) (_ []int, ok bool) {
	raw := r.optList("layer_types")
	if raw == nil || r.err != nil {
		return nil, false
	}
	if len(raw) != layers {
		r.fail(fmt.Sprintf("layer_types lists %d layers for num_hidden_layers = %d", len(raw), layers))
		return nil, true
	}
	var out []int
	for i, v := range raw {
		switch v {
		case attention:
			out = append(out, i)
		case other:
		default:
			r.fail(fmt.Sprintf("layer_types[%d] = %s: want %q or %q", i, strictjson.Kind(v), other, attention))
			return nil, true
		}
	}
	return out, true
}

// writeLayerKinds writes config.layer_types: attention for the layers
// where attends says so, other for the rest.
func writeLayerKinds(c map[string]any, layers int, attends func(int) bool, attention, other string) {
	types := make([]string, layers)
	for i := range types {
		types[i] = other
		if attends(i) {
			types[i] = attention
		}
	}
	c["layer_types"] = types
}

// unsupportedModelType says what to do about a model_type the engine
// lacks: the nearest family it has, where the list is, and how a family
// is added.
func unsupportedModelType(where, mt string) error {
	near := ""
	if fs := nearestFamilies(mt); len(fs) > 0 {
		near = fmt.Sprintf("; the nearest it models: %s (check the architecture matches before describing the model as one)", strings.Join(fs, ", "))
	} else if d := didYouMeanSameKind(mt, Families()); d != "" {
		near = d
	}
	what := fmt.Sprintf("%s: model_type %q", where, mt)
	if where == "model.family" {
		what = fmt.Sprintf("model.family %q", mt)
	}
	return fmt.Errorf("%s is not supported: it is not one of the %d families the engine models (plan -families lists them)%s. "+
		"A family is one file, vram/family_%s.go, with its tests (go doc ./vram, \"Adding a family\")", what, len(Families()), near, mt)
}

// mlpLayerTypes reads mlp_layer_types, the per-layer MLP kinds of
// transformers 5's MoE configs (GLM-4.7-Flash, DeepSeek-V3.2, GLM-5,
// K-EXAONE, MiMo-V2-Flash, Kimi-Linear, MiniMax-M3): dense layers first,
// then sparse (the layout the engine models), as the number of dense
// layers; absent, one dense layer.
func mlpLayerTypes(c *hfReader, layers int) int {
	raw := c.optList("mlp_layer_types")
	if raw == nil {
		return min(1, layers)
	}
	if len(raw) != layers {
		c.fail(fmt.Sprintf("mlp_layer_types lists %d layers for num_hidden_layers = %d", len(raw), layers))
		return 0
	}
	dense := 0
	for i, v := range raw {
		s, _ := v.(string)
		switch {
		case s == "dense" && i == dense:
			dense++
		case s == "sparse":
		default:
			c.fail(fmt.Sprintf("mlp_layer_types[%d] = %q: want the dense layers first, then sparse (%s)", i, s, strings.Join([]string{"dense", "sparse"}, " or ")))
			return 0
		}
	}
	return dense
}
