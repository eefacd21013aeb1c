package yaml

import (
	"fmt"
	"sort"
	"strings"
)

// maxInterpolationDepth bounds interpolations naming interpolations.
const maxInterpolationDepth = 32

// Resolve replaces every interpolation in the values of a config written
// as dotted keys (a.b.c), in place, and returns the keys whose value was
// one interpolation of another key's (they follow that key).
func Resolve(flat map[string]any) (derived map[string]bool, err error) {
	r := &resolver{flat: flat}
	derived = map[string]bool{}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := flat[k].(string)
		if !ok || !strings.Contains(s, "${") {
			continue
		}
		v, err := r.interpolate(k, s, 0)
		if err != nil {
			return nil, err
		}
		flat[k] = v
		if strings.HasPrefix(s, "${") && closingBrace(s, 2) == len(s)-1 && !strings.HasPrefix(s, "${oc.env:") {
			derived[k] = true // it follows another key (or its default)
		}
	}
	return derived, nil
}

// resolver is one config's resolution.
type resolver struct {
	flat  map[string]any
	bytes int // text the interpolations have made
}

// interpolate resolves the interpolations in s, the value of key.
func (r *resolver) interpolate(key, s string, depth int) (any, error) {
	if depth > maxInterpolationDepth {
		return nil, fmt.Errorf("%s: the interpolation %q refers to itself (or nests more than %d deep)", key, s, maxInterpolationDepth)
	}
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		end := closingBrace(s, i+2)
		if end < 0 {
			return nil, fmt.Errorf("%s: %q: an interpolation without its closing }", key, s)
		}
		v, err := r.resolveRef(key, s[i+2:end], depth)
		if err != nil {
			return nil, err
		}
		if i == 0 && end == len(s)-1 && out.Len() == 0 {
			return v, nil // the whole value: keep its type
		}
		out.WriteString(s[:i])
		if v != nil {
			out.WriteString(fmt.Sprint(v))
		} else {
			out.WriteString("None")
		}
		if r.bytes += out.Len(); r.bytes > MaxBytes {
			return nil, fmt.Errorf("%s: interpolations expand past %d bytes, more than a config has", key, MaxBytes)
		}
		s = s[end+1:]
	}
}

// closingBrace finds the } that closes the interpolation opened before
// from, past nested ones.
func closingBrace(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// resolveRef is the value an interpolation's body names.
func (r *resolver) resolveRef(key, body string, depth int) (any, error) {
	body = strings.TrimSpace(body)
	if name, args, ok := strings.Cut(body, ":"); ok && strings.HasPrefix(name, "oc.") {
		parts := splitTopLevel(args)
		def := func() (any, error) {
			if len(parts) < 2 {
				return nil, nil
			}
			d := strings.TrimSpace(parts[1])
			if strings.Contains(d, "${") {
				return r.interpolate(key, d, depth+1)
			}
			return Scalar(strings.Trim(d, `'"`)), nil
		}
		switch name {
		case "oc.select":
			path := interpolationPath(key, strings.TrimSpace(parts[0]))
			if _, ok := r.flat[path]; !ok {
				return def()
			}
			return r.lookup(key, path, depth)
		case "oc.env":
			return def()
		}
		return nil, fmt.Errorf("%s: the resolver %s is not read (oc.select and oc.env are)", key, name)
	}
	return r.lookup(key, interpolationPath(key, body), depth)
}

// lookup is the value at path, its own interpolations resolved.
func (r *resolver) lookup(key, path string, depth int) (any, error) {
	v, ok := r.flat[path]
	if !ok {
		return nil, fmt.Errorf("%s: the interpolation names %s, which the config does not have", key, path)
	}
	if s, isStr := v.(string); isStr && strings.Contains(s, "${") {
		v, err := r.interpolate(path, s, depth+1)
		if err == nil {
			r.flat[path] = v // resolved once: a key named by many is not expanded again
		}
		return v, err
	}
	return v, nil
}

// interpolationPath makes a reference absolute: ".x" beside key, "..x"
// a level up, "a.b" from the root.
func interpolationPath(key, ref string) string {
	dots := len(ref) - len(strings.TrimLeft(ref, "."))
	if dots == 0 {
		return ref
	}
	segs := strings.Split(key, ".")
	keep := max(0, len(segs)-dots)
	return strings.Join(append(segs[:keep:keep], ref[dots:]), ".")
}

// splitTopLevel splits a resolver's arguments at the commas outside
// nested braces and brackets.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
