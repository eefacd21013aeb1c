package toml

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The budgets: what a config file is never larger than.
const (
	MaxBytes = 4 << 20
	MaxDepth = 64
	MaxNodes = 1 << 17
)

type tomlParser struct {
	s     string
	i     int
	line  int
	nodes int
}

// Parse reads a TOML document into maps, slices, strings, bools,
// int64 and float64.
func Parse(src []byte) (map[string]any, error) {
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("toml: %d bytes, more than %d a config has", len(src), MaxBytes)
	}
	if i := strings.IndexByte(string(src), 0); i >= 0 {
		return nil, fmt.Errorf("toml: a NUL byte at offset %d: not a text file", i)
	}
	p := &tomlParser{s: string(src), line: 1}
	root := map[string]any{}
	cur := root
	defined := map[string]bool{}
	for {
		p.skipBlank()
		if p.i >= len(p.s) {
			return root, nil
		}
		if p.s[p.i] == '[' {
			t, err := p.header(root, defined)
			if err != nil {
				return nil, err
			}
			cur = t
		} else if err := p.keyValue(cur); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '#' {
			p.skipComment()
		}
		if p.i < len(p.s) && p.s[p.i] != '\n' && p.s[p.i] != '\r' {
			return nil, p.fail(fmt.Sprintf("%q after a value", p.rest()))
		}
	}
}

func (p *tomlParser) fail(what string) error { return fmt.Errorf("toml: line %d: %s", p.line, what) }

func (p *tomlParser) rest() string {
	j := strings.IndexByte(p.s[p.i:], '\n')
	if j < 0 {
		j = len(p.s) - p.i
	}
	return strings.TrimSpace(p.s[p.i : p.i+min(j, 40)])
}

func (p *tomlParser) node() error {
	p.nodes++
	if p.nodes > MaxNodes {
		return fmt.Errorf("toml: more than %d values, more than a config has", MaxNodes)
	}
	return nil
}

func (p *tomlParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *tomlParser) skipComment() {
	for p.i < len(p.s) && p.s[p.i] != '\n' {
		p.i++
	}
}

// skipBlank skips spaces, comments and newlines.
func (p *tomlParser) skipBlank() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\r':
			p.i++
		case '\n':
			p.i++
			p.line++
		case '#':
			p.skipComment()
		default:
			return
		}
	}
}

// header reads [table] or [[array of tables]] and returns the table that
// the following keys go into.
func (p *tomlParser) header(root map[string]any, defined map[string]bool) (map[string]any, error) {
	array := strings.HasPrefix(p.s[p.i:], "[[")
	if array {
		p.i += 2
	} else {
		p.i++
	}
	keys, err := p.keyPath()
	if err != nil {
		return nil, err
	}
	closing := "]"
	if array {
		closing = "]]"
	}
	p.skipSpace()
	if !strings.HasPrefix(p.s[p.i:], closing) {
		return nil, p.fail("a table header without its " + closing)
	}
	p.i += len(closing)
	t := root
	for _, k := range keys[:len(keys)-1] {
		if t, err = p.subTable(t, k); err != nil {
			return nil, err
		}
	}
	last := keys[len(keys)-1]
	name := strings.Join(keys, ".")
	if array {
		list, _ := t[last].([]any)
		if _, exists := t[last]; exists && list == nil {
			return nil, p.fail(fmt.Sprintf("[[%s]]: %s is not an array of tables", name, last))
		}
		nt := map[string]any{}
		t[last] = append(list, nt)
		return nt, p.node()
	}
	if defined[name] {
		return nil, p.fail(fmt.Sprintf("table [%s] defined twice", name))
	}
	defined[name] = true
	return p.subTable(t, last)
}

// subTable is t's table k, made if missing (the last of an array of
// tables).
func (p *tomlParser) subTable(t map[string]any, k string) (map[string]any, error) {
	switch v := t[k].(type) {
	case nil:
		nt := map[string]any{}
		t[k] = nt
		return nt, p.node()
	case map[string]any:
		return v, nil
	case []any:
		if len(v) > 0 {
			if m, ok := v[len(v)-1].(map[string]any); ok {
				return m, nil
			}
		}
	}
	return nil, p.fail(fmt.Sprintf("%s is a value, not a table", k))
}

// keyPath reads a dotted key: bare or quoted parts.
func (p *tomlParser) keyPath() ([]string, error) {
	var keys []string
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, p.fail("a key is missing")
		}
		var k string
		switch c := p.s[p.i]; {
		case c == '"' || c == '\'':
			v, err := p.str()
			if err != nil {
				return nil, err
			}
			k = v
		default:
			j := p.i
			for j < len(p.s) && (isBareKeyByte(p.s[j])) {
				j++
			}
			if j == p.i {
				return nil, p.fail(fmt.Sprintf("%q is not a key", p.rest()))
			}
			k, p.i = p.s[p.i:j], j
		}
		keys = append(keys, k)
		if len(keys) > MaxDepth {
			return nil, p.fail("a key nested deeper than 64")
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '.' {
			p.i++
			continue
		}
		return keys, nil
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// keyValue reads key = value into t.
func (p *tomlParser) keyValue(t map[string]any) error {
	keys, err := p.keyPath()
	if err != nil {
		return err
	}
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != '=' {
		return p.fail(fmt.Sprintf("key %q without = value", strings.Join(keys, ".")))
	}
	p.i++
	v, err := p.value(0)
	if err != nil {
		return err
	}
	for _, k := range keys[:len(keys)-1] {
		if t, err = p.subTable(t, k); err != nil {
			return err
		}
	}
	last := keys[len(keys)-1]
	if _, dup := t[last]; dup {
		return p.fail(fmt.Sprintf("key %q given twice", strings.Join(keys, ".")))
	}
	t[last] = v
	return p.node()
}

func (p *tomlParser) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail("a value nested deeper than 64")
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, p.fail("a value is missing")
	}
	switch c := p.s[p.i]; c {
	case '"', '\'':
		return p.str()
	case '[':
		return p.array(depth)
	case '{':
		return p.inlineTable(depth)
	}
	j := p.i
	for j < len(p.s) && !strings.ContainsRune(",]}#\n\r", rune(p.s[j])) && !(p.s[j] == ' ' && !p.dateSpace(j)) {
		j++
	}
	tok := p.s[p.i:j]
	p.i = j
	return tomlScalar(tok, p)
}

// dateSpace reports whether a space at j joins a date and a time.
func (p *tomlParser) dateSpace(j int) bool {
	return j > p.i && j+1 < len(p.s) && p.s[j-1] >= '0' && p.s[j-1] <= '9' && p.s[j+1] >= '0' && p.s[j+1] <= '9' && strings.Count(p.s[p.i:j], "-") == 2
}

func tomlScalar(tok string, p *tomlParser) (any, error) {
	switch tok {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "inf", "+inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan", "+nan", "-nan":
		return math.NaN(), nil
	case "":
		return nil, p.fail("a value is missing")
	}
	clean := strings.ReplaceAll(tok, "_", "")
	digits := strings.TrimLeft(clean, "+-")
	dateLike := strings.Contains(digits, ":") || strings.Count(digits, "-") >= 2
	if !dateLike && len(digits) > 1 && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9' {
		return nil, p.fail(fmt.Sprintf("%q is not a TOML value (no leading zeros)", tok))
	}
	if i, err := strconv.ParseInt(clean, 0, 64); err == nil {
		return i, nil
	}
	if isFloat(clean) {
		if f, err := strconv.ParseFloat(clean, 64); err == nil {
			return f, nil
		}
	}
	if len(tok) >= 8 && tok[0] >= '0' && tok[0] <= '9' && strings.ContainsAny(tok, "-:") {
		return tok, nil // a date or time, kept as written
	}
	return nil, p.fail(fmt.Sprintf("%q is not a TOML value (strings are quoted)", tok))
}

// str reads a basic, literal or multi-line string.
func (p *tomlParser) str() (string, error) {
	q := p.s[p.i]
	multi := strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))
	if multi {
		end := strings.Index(p.s[p.i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return "", p.fail("an unterminated multi-line string")
		}
		body := p.s[p.i+3 : p.i+3+end]
		p.line += strings.Count(body, "\n")
		p.i += 6 + end
		body = strings.TrimPrefix(strings.TrimPrefix(body, "\r"), "\n")
		if q == '\'' {
			return body, nil
		}
		return unescapeTOML(body, p)
	}
	j := p.i + 1
	for j < len(p.s) && p.s[j] != q && p.s[j] != '\n' {
		if q == '"' && p.s[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(p.s) || p.s[j] != q {
		return "", p.fail("an unterminated string")
	}
	body := p.s[p.i+1 : j]
	p.i = j + 1
	if q == '\'' {
		return body, nil
	}
	return unescapeTOML(body, p)
}

// unescapeTOML reads a basic string's escapes as TOML 1.0 defines them:
// \b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX, and in a multi-line string a
// backslash at a line's end, which joins it to the next non-blank text.
func unescapeTOML(body string, p *tomlParser) (string, error) {
	if !strings.Contains(body, "\\") {
		return body, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(body) {
			return "", p.fail("a string ends with a backslash")
		}
		i++
		switch e := body[i]; e {
		case 'b', 't', 'n', 'f', 'r', '"', '\\':
			b.WriteString(map[byte]string{'b': "\b", 't': "\t", 'n': "\n", 'f': "\f", 'r': "\r", '"': `"`, '\\': `\`}[e])
		case 'u', 'U':
			n := map[byte]int{'u': 4, 'U': 8}[e]
			if i+n >= len(body) {
				return "", p.fail(fmt.Sprintf("a short \\%c escape", e))
			}
			r, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(r)) {
				return "", p.fail(fmt.Sprintf("a bad \\%c escape", e))
			}
			b.WriteRune(rune(r))
			i += n
		case ' ', '\t', '\r', '\n': // a line-ending backslash
			j := i
			for j < len(body) && strings.ContainsRune(" \t\r", rune(body[j])) {
				j++
			}
			if j == len(body) || body[j] != '\n' {
				return "", p.fail("a backslash before a space that does not end the line")
			}
			for j < len(body) && strings.ContainsRune(" \t\r\n", rune(body[j])) {
				j++
			}
			i = j - 1
		default:
			return "", p.fail(fmt.Sprintf("\\%c is not a TOML escape", e))
		}
	}
	return b.String(), nil
}

// isFloat tells a TOML float's text (underscores removed): digits with a
// fraction, an exponent or both.
func isFloat(s string) bool {
	digits := false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case strings.ContainsRune("+-.eE", c):
		default:
			return false
		}
	}
	return digits && strings.ContainsAny(s, ".eE")
}

func (p *tomlParser) array(depth int) (any, error) {
	p.i++
	out := []any{}
	for {
		p.skipBlank()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.node(); err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipBlank()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return out, nil
		}
		return nil, p.fail("an array without its , or ]")
	}
}

func (p *tomlParser) inlineTable(depth int) (any, error) {
	p.i++
	t := map[string]any{}
	for {
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return t, nil
		}
		if depth > MaxDepth {
			return nil, p.fail("a value nested deeper than 64")
		}
		keys, err := p.keyPath()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '=' {
			return nil, p.fail("an inline table's key without = value")
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		sub := t
		for _, k := range keys[:len(keys)-1] {
			if sub, err = p.subTable(sub, k); err != nil {
				return nil, err
			}
		}
		if _, dup := sub[keys[len(keys)-1]]; dup {
			return nil, p.fail("an inline table's key given twice")
		}
		sub[keys[len(keys)-1]] = v
		if err := p.node(); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return t, nil
		}
		return nil, p.fail("an inline table without its , or }")
	}
}
