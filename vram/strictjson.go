package vram

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// strictDecode decodes one JSON value into v the way a plan file must be
// read: every key must be a field of v spelled exactly (encoding/json
// matches keys case-insensitively; a plan must not), and nothing may follow
// the value. prefix names where the value sits ("train.") in the errors.
func strictDecode(data []byte, v any, prefix string) error {
	if err := checkKeys(data, reflect.TypeOf(v), prefix); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fieldErr(prefix, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%sunexpected data after the JSON value", strings.TrimSuffix(prefix, "."))
	}
	return nil
}

// fieldErr names the field of a type error with its full path.
func fieldErr(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		want := jsonWant(te.Type)
		if vs, ok := enumValues[te.Field[strings.LastIndex(te.Field, ".")+1:]]; ok && te.Type.Kind() == reflect.String {
			want = "one of the strings " + strings.Join(vs, ", ")
		}
		return fmt.Errorf("%s%s: want %s, got %s", prefix, te.Field, want, jsonGot(te.Value))
	}
	if prefix != "" {
		return fmt.Errorf("%s: %w", strings.TrimSuffix(prefix, "."), err)
	}
	return err
}

// keyAliases are keys users bring from their trainers' and engines'
// configs, and how a plan says each (the first word is the plan's key):
// closer than any spelling, which would offer "lora" for "qlora".
var keyAliases = map[string]string{
	"qlora":                       `quantized_base ({"dtype": "nf4", "double_quant": true}) with a lora`,
	"load_in_4bit":                `quantized_base ({"dtype": "nf4"}) with a lora`,
	"adapter":                     `lora, with trainable "lora"`,
	"gradient_checkpointing":      `grad_checkpointing ("full", "selective", "op", "none")`,
	"activation_checkpointing":    `grad_checkpointing ("full", "selective", "op", "none")`,
	"gradient_accumulation_steps": "grad_accum",
	"batch_size":                  "micro_batch (per GPU)",
	"micro_batch_size":            "micro_batch",
	"per_device_train_batch_size": "micro_batch",
	"sequence_len":                "seq_len",
	"max_seq_len":                 "seq_len",
	"max_length":                  "seq_len",
	"seq_length":                  "seq_len",
	"bf16":                        `precision ("bf16", "amp_bf16", "mixed_bf16")`,
	"fp16":                        `precision ("fp16", "amp_fp16", "mixed_fp16")`,
	"mixed_precision":             `precision ("amp_bf16", "mixed_bf16", …)`,
	"flash_attention":             `attention ("flash2")`,
	"attn_implementation":         `attention ("sdpa", "flash2", "eager")`,
	"zero_stage":                  "parallel (its zero_stage)",
	"tensor_parallel_size":        "parallel (its tp) for training, or vllm's tensor_parallel_size for serving",
	"max_model_len":               "vllm (its max_model_len)",
	"gpu_memory_utilization":      "vllm (its gpu_memory_utilization)",
}

// enumValues are the values of each plan field that takes one of a list of
// words, by its JSON name: a type error names them ("grad_checkpointing":
// true wants one of the strings none, selective, …). enum fills it where
// each list is declared, which validation checks against (oneOf).
var enumValues = map[string][]string{}

// enum declares a field's words, for its error messages and oneOf.
func enum[S ~string](field string, values ...S) []S {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = string(v)
	}
	enumValues[field] = append(enumValues[field], words...)
	return values
}

// jsonWant says in a plan's words what a field of Go type t takes (an
// error never names a Go type).
func jsonWant(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[Bytes]():
		return "a size (a number of bytes or a string such as \"80 GiB\")"
	case reflect.TypeFor[DType]():
		return "a dtype name (a string such as \"bf16\")"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another kind of value"
}

// jsonGot names the kind of JSON value encoding/json found ("string",
// "number 1.5", "bool", "array", "object").
func jsonGot(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case strings.HasPrefix(v, "number"):
		if n := strings.TrimSpace(strings.TrimPrefix(v, "number")); n != "" {
			return "the number " + n
		}
		return "a number"
	}
	return v
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkKeys walks data alongside type t and reports the first object key
// that is not exactly one of the struct's JSON field names. Values of types
// that decode themselves (Bytes, DType, …) are left to their decoders;
// malformed JSON is left to the decoder, which says where.
func checkKeys(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			return nil
		}
		fields, zeros := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return fmt.Errorf("%s%s: keys are case-sensitive; did you mean %q?", path, k, name)
					}
				}
				if real, ok := keyAliases[k]; ok && fields[strings.Fields(real)[0]] != nil {
					return fmt.Errorf("%s%s: unknown field; the plan says it as %s", path, k, real)
				}
				if hint := didYouMean(k, sortedKeys(fields)); hint != "" {
					return fmt.Errorf("%s%s: unknown field%s", path, k, hint)
				}
				return fmt.Errorf("%s%s: unknown field; known: %s", path, k, strings.Join(sortedKeys(fields), ", "))
			}
			if why, ok := zeros[k]; ok && isJSONZero(obj[k]) {
				return fmt.Errorf("%s%s: 0 %s; leave the field out for the default", path, k, why)
			}
			if err := checkKeys(obj[k], ft, path+k+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkKeys(it, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil
		}
		for k, it := range obj {
			if err := checkKeys(it, t.Elem(), path+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// isJSONZero tells a JSON number that is zero (0, 0.0, -0, 0e5).
func isJSONZero(raw json.RawMessage) bool {
	var f float64
	return json.Unmarshal(raw, &f) == nil && f == 0
}

// jsonFields maps a struct's JSON names to their field types, and those
// whose zero means "unset" (the default) to why an explicit 0 is refused,
// from the field's `zero` tag: a plan that says 0 must not get the
// default silently.
func jsonFields(t reflect.Type) (map[string]reflect.Type, map[string]string) {
	fields, zeros := map[string]reflect.Type{}, map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
		if why := f.Tag.Get("zero"); why != "" {
			zeros[name] = why
		}
	}
	return fields, zeros
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
