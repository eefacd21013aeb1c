package jsonschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children,omitempty"`
	inner
	Skip    int `json:"-"`
	private int
}

type inner struct {
	Size uint `json:"size"`
}

type selfMarshal struct{}

func (selfMarshal) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

type holder struct {
	X selfMarshal `json:"x"`
}

// TestGenerate: fields by their json names, embedded structs flattened,
// "-" and unexported fields left out, recursive types by $ref, required
// where asked, and a self-marshalling type refused unless overridden.
func TestGenerate(t *testing.T) {
	doc, err := Generate(reflect.TypeFor[node](), Options{Required: true, ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	got := string(b)
	for _, want := range []string{`"$id":"x"`, `"required":["name","size"]`, `"children":{"items":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]},"type":["array","null"]}`,
		`"size":{"minimum":0,"type":"integer"}`, `"additionalProperties":false`} {
		if !strings.Contains(got, want) {
			t.Errorf("schema lacks %s:\n%s", want, got)
		}
	}
	for _, not := range []string{"Skip", "private", "inner"} {
		if strings.Contains(got, not) {
			t.Errorf("schema holds %s:\n%s", not, got)
		}
	}
	if _, err := Generate(reflect.TypeFor[holder](), Options{}); err == nil || !strings.Contains(err.Error(), "marshals itself") {
		t.Errorf("a self-marshalling field: %v", err)
	}
	doc, err = Generate(reflect.TypeFor[holder](), Options{Overrides: map[reflect.Type]any{reflect.TypeFor[selfMarshal](): Schema{"type": "integer"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(doc); !strings.Contains(string(b), `"selfMarshal":{"type":"integer"}`) {
		t.Errorf("override not used: %s", b)
	}
}
