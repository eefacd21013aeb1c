package yaml

import (
	"strconv"
	"strings"
	"testing"
)

// flatten writes a tree as the dotted keys Resolve reads.
func flatten(tree map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, e)
			}
			return
		}
		out[prefix] = v
	}
	walk("", tree)
	return out
}

func TestOmegaConfInterpolation(t *testing.T) {
	tree := map[string]any{
		"a": map[string]any{"n": int64(8), "m": "${.n}", "text": "run_${a.n}_x", "env": "${oc.env:HOME,/tmp}",
			"sel": "${oc.select:a.missing,4}", "selnull": "${oc.select:.missing,null}", "present": "${oc.select:.n,1}",
			"deep": map[string]any{"up": "${..n}"}},
		"b": "${a.m}",
	}
	flat := flatten(tree)
	derived, err := Resolve(flat)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"a.m": int64(8), "a.text": "run_8_x", "a.env": "/tmp", "a.sel": int64(4), "a.selnull": nil,
		"a.present": int64(8), "a.deep.up": int64(8), "b": int64(8)} {
		if got := flat[k]; got != want {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	if !derived["b"] || derived["a.text"] || derived["a.env"] {
		t.Errorf("derived %v: b follows a key; text around one and oc.env do not", derived)
	}
	for _, c := range []struct {
		tree map[string]any
		want string
	}{
		{map[string]any{"x": "${y}", "y": "${x}"}, "refers to itself"},
		{map[string]any{"x": "${nowhere.at_all}"}, "x: the interpolation names nowhere.at_all, which the config does not have"},
		{map[string]any{"x": "${oc.create:{}}"}, "the resolver oc.create is not read"},
		{map[string]any{"x": "${y"}, "an interpolation without its closing }"},
		{doubling(40), "interpolations expand past"},
	} {
		if _, err := Resolve(flatten(c.tree)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.tree, err, c.want)
		}
	}
}

// doubling is a config whose every key is the next one twice over: 2^n
// bytes if expanded, as a hostile file could write.
func doubling(n int) map[string]any {
	m := map[string]any{"k0": "xxxxxxxx"}
	for i := 1; i <= n; i++ {
		m["k"+strconv.Itoa(i)] = "${k" + strconv.Itoa(i-1) + "}${k" + strconv.Itoa(i-1) + "}"
	}
	return m
}
