// Package strictjson decodes JSON the way a plan file must be read: every
// key must be a field of the value spelled exactly (encoding/json matches
// keys case-insensitively; a plan must not), nothing may follow the value,
// an explicit 0 is refused where a field's `zero` tag says why (its zero
// means unset), and every error names the field by its full path in the
// format's words, never a Go type. It knows nothing of memory: what an
// error may say of a field — its words, the keys users bring from
// elsewhere, the nearest spelling — comes in Hints.
//
//	err := strictjson.Decode(data, &plan, "train.", hints)
package strictjson

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

// Hints are what errors may say of a format's fields.
type Hints struct {
	// Name is what the errors call the format ("the plan").
	Name string
	// Values are the words of each field that takes one of a list, by
	// its JSON name: a value of the wrong kind names them.
	Values map[string][]string
	// Aliases are keys users bring from other configs, and how this
	// format says each (the first word is its key).
	Aliases map[string]string
	// Suggest is a clause naming the nearest of known to key ("; did you
	// mean …?"), or "".
	Suggest func(key string, known []string) string
}

// Wanter is a type that decodes itself and says what it takes, in the
// format's words, for an error ("a size (a number of bytes or …)").
type Wanter interface{ JSONWant() string }

// Decode decodes one JSON value into v; prefix names where the value sits
// ("train.") in the errors.
func Decode(data []byte, v any, prefix string, h Hints) error {
	if err := checkKeys(data, reflect.TypeOf(v), prefix, h); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fieldErr(prefix, err, h)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%sunexpected data after the JSON value", strings.TrimSuffix(prefix, "."))
	}
	return nil
}

// fieldErr names the field of a type error with its full path.
func fieldErr(prefix string, err error, h Hints) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		want := jsonWant(te.Type)
		if vs, ok := h.Values[te.Field[strings.LastIndex(te.Field, ".")+1:]]; ok && te.Type.Kind() == reflect.String {
			want = "one of the strings " + strings.Join(vs, ", ")
		}
		return fmt.Errorf("%s%s: want %s, got %s", prefix, te.Field, want, jsonGot(te.Value))
	}
	if prefix != "" {
		return fmt.Errorf("%s: %w", strings.TrimSuffix(prefix, "."), err)
	}
	return err
}

var wanter = reflect.TypeFor[Wanter]()

// jsonWant says in the format's words what a field of Go type t takes.
func jsonWant(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(wanter) {
		return reflect.Zero(t).Interface().(Wanter).JSONWant()
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
func checkKeys(data []byte, t reflect.Type, path string, h Hints) error {
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
				if real, ok := h.Aliases[k]; ok && fields[strings.Fields(real)[0]] != nil {
					return fmt.Errorf("%s%s: unknown field; %s says it as %s", path, k, h.Name, real)
				}
				if hint := suggest(h, k, sortedKeys(fields)); hint != "" {
					return fmt.Errorf("%s%s: unknown field%s", path, k, hint)
				}
				return fmt.Errorf("%s%s: unknown field; known: %s", path, k, strings.Join(sortedKeys(fields), ", "))
			}
			if why, ok := zeros[k]; ok && isJSONZero(obj[k]) {
				return fmt.Errorf("%s%s: 0 %s; leave the field out for the default", path, k, why)
			}
			if err := checkKeys(obj[k], ft, path+k+".", h); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkKeys(it, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), h); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil
		}
		for k, it := range obj {
			if err := checkKeys(it, t.Elem(), path+k+".", h); err != nil {
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

func suggest(h Hints, key string, known []string) string {
	if h.Suggest == nil {
		return ""
	}
	return h.Suggest(key, known)
}

// Kind names a decoded JSON value for an error: its type and value.
func Kind(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", v)
}
