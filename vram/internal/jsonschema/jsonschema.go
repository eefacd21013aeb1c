// Package jsonschema writes the JSON Schema (draft 2020-12) of a Go type as
// encoding/json reads and writes it: a struct's fields by their json tags
// (embedded structs flattened, "-" and unexported fields left out), each
// named type once under $defs and referred to by $ref, so recursive types
// work. A type that marshals itself (json.Marshaler) must be described by
// an override; the generator refuses it otherwise rather than guess.
//
//	doc, err := jsonschema.Generate(reflect.TypeFor[T](), jsonschema.Options{Required: true})
//	b, _ := json.MarshalIndent(doc, "", "  ")
//
// It knows nothing of VRAM Lab.
package jsonschema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Schema is one schema object.
type Schema = map[string]any

// Options shape the document.
type Options struct {
	// ID and Title head the document.
	ID, Title string
	// Required makes every field without omitempty or omitzero required,
	// as a type's output always holds it; an input's fields all default.
	Required bool
	// Overrides describe types in place of reflection: a Schema used as
	// is, or a reflect.Type reflected instead (a struct built with
	// reflect.StructOf for a type whose MarshalJSON adds a field).
	Overrides map[reflect.Type]any
	// Omit names fields left out of a struct type's schema (by json name):
	// fields its readers refuse where the type is used.
	Omit map[reflect.Type][]string
	// Extra are schemas put under $defs by name for the overrides to
	// refer to: a named type under its own name is reflected as usual, a
	// struct type under another name by its fields.
	Extra map[string]reflect.Type
}

// Generate is the schema document of t.
func Generate(t reflect.Type, opt Options) (Schema, error) {
	g := &gen{opt: opt, defs: Schema{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
	// The root is written in place (an MCP tool's schema has its type at
	// the top), a struct by its fields.
	var root Schema
	var err error
	if t.Kind() == reflect.Struct && g.opt.Overrides[t] == nil {
		root, err = g.object(t)
	} else {
		root, err = g.schema(t)
	}
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(opt.Extra)) {
		t := opt.Extra[name]
		if name == t.Name() {
			if _, err := g.schema(t); err != nil {
				return nil, err
			}
			continue
		}
		s, err := g.object(t)
		if err != nil {
			return nil, err
		}
		g.defs[name], g.taken[name] = s, t
	}
	doc := Schema{"$schema": "https://json-schema.org/draft/2020-12/schema"}
	if opt.ID != "" {
		doc["$id"] = opt.ID
	}
	if opt.Title != "" {
		doc["title"] = opt.Title
	}
	for k, v := range root {
		doc[k] = v
	}
	if len(g.defs) > 0 {
		doc["$defs"] = g.defs
	}
	return doc, nil
}

type gen struct {
	opt   Options
	defs  Schema
	names map[reflect.Type]string // named types already under $defs
	taken map[string]reflect.Type // $defs keys in use
}

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// schema is t's schema: a $ref for a named struct or overridden type, the
// schema itself otherwise.
func (g *gen) schema(t reflect.Type) (Schema, error) {
	if t.Kind() == reflect.Pointer {
		s, err := g.schema(t.Elem())
		return nullable(s), err
	}
	if o, ok := g.opt.Overrides[t]; ok {
		return g.named(t, func() (Schema, error) { return g.override(t, o) })
	}
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return nil, fmt.Errorf("jsonschema: %v marshals itself (MarshalJSON): describe it with an override", t)
	}
	if t.Name() != "" && t.Kind() == reflect.Struct {
		return g.named(t, func() (Schema, error) { return g.object(t) })
	}
	return g.unnamed(t)
}

// named puts a named type's schema under $defs once and refers to it.
func (g *gen) named(t reflect.Type, build func() (Schema, error)) (Schema, error) {
	if t.Name() == "" {
		return build()
	}
	if n, ok := g.names[t]; ok {
		return Schema{"$ref": "#/$defs/" + n}, nil
	}
	n := t.Name()
	if other, ok := g.taken[n]; ok && other != t {
		n = t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + n
	}
	g.names[t], g.taken[n] = n, t
	g.defs[n] = Schema{} // a recursive reference finds the name
	s, err := build()
	if err != nil {
		return nil, err
	}
	g.defs[n] = s
	return Schema{"$ref": "#/$defs/" + n}, nil
}

func (g *gen) override(t reflect.Type, o any) (Schema, error) {
	switch x := o.(type) {
	case Schema:
		return x, nil
	case reflect.Type:
		if x.Kind() == reflect.Struct {
			return g.object(x)
		}
		return g.unnamed(x)
	}
	return nil, fmt.Errorf("jsonschema: the override of %v is a %T, not a Schema or a reflect.Type", t, o)
}

// unnamed is the schema of a type by its kind.
func (g *gen) unnamed(t reflect.Type) (Schema, error) {
	if t == reflect.TypeFor[time.Duration]() {
		return Schema{"type": "integer", "description": "nanoseconds"}, nil
	}
	if t.Implements(textMarshaler) {
		return Schema{"type": "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return Schema{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Schema{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}, nil
	case reflect.String:
		return Schema{"type": "string"}, nil
	case reflect.Interface:
		return Schema{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return Schema{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		if t.Kind() == reflect.Array {
			return Schema{"type": "array", "items": items, "minItems": t.Len(), "maxItems": t.Len()}, nil
		}
		return nullable(Schema{"type": "array", "items": items}), nil
	case reflect.Map:
		values, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(Schema{"type": "object", "additionalProperties": values}), nil
	case reflect.Struct:
		return g.object(t)
	}
	return nil, fmt.Errorf("jsonschema: %v (a %v) has no JSON form", t, t.Kind())
}

// object is a struct's schema: its fields as encoding/json sees them.
func (g *gen) object(t reflect.Type) (Schema, error) {
	props := Schema{}
	var required []string
	if err := g.fields(t, props, &required); err != nil {
		return nil, err
	}
	s := Schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

// fields adds t's fields to props, flattening embedded structs.
func (g *gen) fields(t reflect.Type, props Schema, required *[]string) error {
	omit := g.opt.Omit[t]
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && g.opt.Overrides[ft] == nil && !ft.Implements(marshaler) {
				if err := g.fields(ft, props, required); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if slices.Contains(omit, name) {
			continue
		}
		s, err := g.schema(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		if strings.Contains(","+opts+",", ",string,") {
			s = Schema{"type": "string"}
		}
		props[name] = s
		if g.opt.Required && !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
	return nil
}

// nullable lets s be null too: encoding/json writes a nil pointer, slice
// or map as null and reads null into one.
func nullable(s Schema) Schema {
	if typ, ok := s["type"].(string); ok {
		out := Schema{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		return out
	}
	return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
}
