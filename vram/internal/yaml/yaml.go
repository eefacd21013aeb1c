package yaml

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The budgets: what a config file is never larger than.
const (
	MaxBytes = 4 << 20
	MaxDepth = 64
	MaxNodes = 1 << 17
)

type yamlLine struct {
	n      int // 1-based line number
	indent int
	text   string
}

type yamlParser struct {
	lines []yamlLine
	pos   int
	nodes int
}

// Parse reads one YAML document into maps (map[string]any), slices
// ([]any), strings, bools, int64, float64 and nil.
func Parse(src []byte) (any, error) {
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("yaml: %d bytes, more than %d a config has", len(src), MaxBytes)
	}
	if i := strings.IndexByte(string(src), 0); i >= 0 {
		return nil, fmt.Errorf("yaml: a NUL byte at offset %d: not a text file", i)
	}
	p := &yamlParser{}
	if err := p.split(string(src)); err != nil {
		return nil, err
	}
	if len(p.lines) == 0 {
		return map[string]any{}, nil
	}
	v, err := p.block(p.lines[0].indent, 0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.lines) {
		l := p.lines[p.pos]
		return nil, fmt.Errorf("yaml: line %d: unexpected indentation or content %q", l.n, l.text)
	}
	return v, nil
}

// split cuts the source into lines without comments and blank lines;
// block scalars keep their lines as they are.
func (p *yamlParser) split(src string) error {
	raw := strings.Split(strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n"), "\n")
	p.lines = make([]yamlLine, 0, len(raw)) // grown by append, a long file's lines would be copied five times over
	for i := 0; i < len(raw); i++ {
		line := raw[i]
		if len(line) > 1<<16 {
			return fmt.Errorf("yaml: line %d is over 64 KiB", i+1)
		}
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "\t") {
			return fmt.Errorf("yaml: line %d: a tab indents it (YAML indents with spaces)", i+1)
		}
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") {
			if len(p.lines) > 0 {
				return fmt.Errorf("yaml: line %d: a second document; a config is one", i+1)
			}
			continue
		}
		if trimmed == "..." || strings.HasPrefix(trimmed, "%") {
			continue
		}
		text := strings.TrimRight(stripComment(trimmed), " \t")
		if text == "" {
			continue
		}
		indent := len(line) - len(trimmed)
		p.lines = append(p.lines, yamlLine{n: i + 1, indent: indent, text: text})
		if isBlockScalarHeader(text) {
			// The block scalar's body: the following lines indented more
			// than this one (or blank), kept raw.
			var body []string
			for i+1 < len(raw) {
				next := raw[i+1]
				nt := strings.TrimLeft(next, " ")
				if nt != "" && len(next)-len(nt) <= indent {
					break
				}
				body = append(body, next)
				i++
			}
			p.lines[len(p.lines)-1].text += "\x00" + strings.Join(body, "\n")
		}
	}
	return nil
}

// stripComment cuts a comment: a # at the line's start or after a space,
// outside quotes.
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				if q == '\'' && i+1 < len(s) && s[i+1] == '\'' {
					i++ // '' inside single quotes
					continue
				}
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case c == '"' || c == '\'':
			if i == 0 || strings.ContainsRune(" [{,:-", rune(s[i-1])) {
				q = c
			}
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

func isBlockScalarHeader(text string) bool {
	v := text
	if k, rest, ok := splitKey(text); ok && k != "" {
		v = rest
	} else if strings.HasPrefix(text, "- ") {
		v = strings.TrimSpace(text[2:])
	}
	v = strings.TrimSpace(v)
	return v == "|" || v == ">" || v == "|-" || v == ">-" || v == "|+" || v == ">+"
}

func (p *yamlParser) node() error {
	p.nodes++
	if p.nodes > MaxNodes {
		return fmt.Errorf("yaml: more than %d values, more than a config has", MaxNodes)
	}
	return nil
}

// block reads the mapping or sequence whose lines start at indent.
func (p *yamlParser) block(indent, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("yaml: line %d: nested deeper than %d", p.lines[p.pos].n, MaxDepth)
	}
	l := p.lines[p.pos]
	if l.text == "-" || strings.HasPrefix(l.text, "- ") {
		return p.sequence(indent, depth)
	}
	if _, _, ok := splitKey(l.text); ok {
		return p.mapping(indent, depth)
	}
	// A lone scalar or flow collection (a document that is one value).
	p.pos++
	return p.inline(l, strings.TrimSpace(l.text), depth)
}

func (p *yamlParser) mapping(indent, depth int) (any, error) {
	m := map[string]any{}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("yaml: line %d: indented more than the keys above it", l.n)
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("yaml: line %d: %q is not a key: value", l.n, l.text)
		}
		if strings.HasPrefix(key, "<<") {
			return nil, fmt.Errorf("yaml: line %d: merge keys (<<) are not read", l.n)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("yaml: line %d: key %q given twice", l.n, key)
		}
		if err := p.node(); err != nil {
			return nil, err
		}
		p.pos++
		v, err := p.value(l, indent, rest, depth)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

// value is a key's value: on its line, or the block below it (a sequence
// may start at the key's own indentation).
func (p *yamlParser) value(l yamlLine, indent int, rest string, depth int) (any, error) {
	rest = strings.TrimSpace(rest)
	if rest != "" && !strings.ContainsAny(rest[:1], "\"'[{&*!|>") && !strings.ContainsRune(rest, 0) {
		// A plain scalar folds over the more-indented lines below it
		// (YAML 1.1 §9.1.3: line folding), as PyYAML writes a long one;
		// the lines are joined once.
		end := p.pos
		for end < len(p.lines) && p.lines[end].indent > indent {
			end++
		}
		rest = p.join(rest, end)
	}
	if rest != "" {
		return p.inline(l, rest, depth)
	}
	if p.pos < len(p.lines) {
		next := p.lines[p.pos]
		if next.indent > indent || next.indent == indent && (next.text == "-" || strings.HasPrefix(next.text, "- ")) {
			return p.block(next.indent, depth+1)
		}
	}
	return nil, nil
}

func (p *yamlParser) sequence(indent, depth int) (any, error) {
	var s []any
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent != indent || !(l.text == "-" || strings.HasPrefix(l.text, "- ")) {
			if l.indent > indent {
				return nil, fmt.Errorf("yaml: line %d: indented more than the sequence above it", l.n)
			}
			break
		}
		if err := p.node(); err != nil {
			return nil, err
		}
		rest := strings.TrimSpace(strings.TrimPrefix(l.text, "-"))
		if rest == "" {
			p.pos++
			v, err := p.value(l, indent, "", depth)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
			continue
		}
		// The item's content is a block of its own two columns in: the
		// rest of this line and the lines indented past the dash.
		after := strings.TrimPrefix(l.text, "-")
		col := indent + 1 + len(after) - len(strings.TrimLeft(after, " "))
		p.lines[p.pos] = yamlLine{n: l.n, indent: col, text: rest}
		v, err := p.block(col, depth+1)
		if err != nil {
			return nil, err
		}
		s = append(s, v)
	}
	if s == nil {
		s = []any{}
	}
	return s, nil
}

// splitKey splits "key: value" (the value may be empty) outside quotes and
// brackets.
func splitKey(text string) (key, rest string, ok bool) {
	if text == "" || text[0] == '[' || text[0] == '{' || strings.HasPrefix(text, "- ") || text == "-" {
		return "", "", false
	}
	var q byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case (c == '"' || c == '\'') && i == 0:
			q = c
		case c == ':' && (i+1 == len(text) || text[i+1] == ' '):
			k := strings.TrimSpace(text[:i])
			if len(k) >= 2 && (k[0] == '"' && k[len(k)-1] == '"' || k[0] == '\'' && k[len(k)-1] == '\'') {
				uq, err := unquote(k)
				if err != nil {
					return "", "", false
				}
				k = uq
			}
			return k, text[i+1:], true
		}
	}
	return "", "", false
}

// inline reads a value written on one line (or a flow collection that
// continues on the next lines, or a block scalar).
func (p *yamlParser) inline(l yamlLine, s string, depth int) (any, error) {
	if s == "" {
		return nil, nil
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return blockScalar(strings.TrimSpace(s[:i]), s[i+1:]), nil
	}
	if c := s[0]; c == '&' || c == '*' || c == '!' {
		return nil, fmt.Errorf("yaml: line %d: anchors, aliases and tags (%q) are not read", l.n, s)
	}
	if s[0] == '[' || s[0] == '{' {
		// A flow collection may continue on more-indented lines: each
		// line is scanned once for its brackets, and all joined once.
		var open flowDepth
		open.scan(s)
		end := p.pos
		for open.depth > 0 && end < len(p.lines) && p.lines[end].indent > l.indent-1 {
			open.scan(p.lines[end].text)
			end++
		}
		s = p.join(s, end)
		f := &flowParser{s: s, line: l.n, p: p}
		v, err := f.value(depth)
		if err != nil {
			return nil, err
		}
		if f.skip(); f.i != len(f.s) {
			return nil, fmt.Errorf("yaml: line %d: %q after the flow collection", l.n, f.s[f.i:])
		}
		return v, nil
	}
	if s[0] == '"' || s[0] == '\'' {
		v, err := unquote(s)
		if err != nil {
			return nil, fmt.Errorf("yaml: line %d: %v", l.n, err)
		}
		return v, nil
	}
	return Scalar(s), nil
}

// join joins first and the lines from p.pos up to end with spaces, once,
// and moves past them.
func (p *yamlParser) join(first string, end int) string {
	n := len(first)
	for _, l := range p.lines[p.pos:end] {
		n += 1 + len(l.text)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(first)
	for _, l := range p.lines[p.pos:end] {
		b.WriteByte(' ')
		b.WriteString(l.text)
	}
	p.pos = end
	return b.String()
}

// flowDepth counts the brackets a flow collection has open, line by
// line, outside quotes.
type flowDepth struct {
	depth int
	q     byte
}

func (f *flowDepth) scan(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case f.q != 0:
			if c == f.q {
				f.q = 0
			}
		case c == '"' || c == '\'':
			f.q = c
		case c == '[' || c == '{':
			f.depth++
		case c == ']' || c == '}':
			f.depth--
		}
	}
}

// blockScalar joins a | (literal) or > (folded) scalar's lines, without
// their common indentation.
func blockScalar(header, body string) string {
	lines := strings.Split(body, "\n")
	ind := -1
	for _, l := range lines {
		if t := strings.TrimLeft(l, " "); t != "" {
			if n := len(l) - len(t); ind < 0 || n < ind {
				ind = n
			}
		}
	}
	for i, l := range lines {
		if len(l) >= ind && ind > 0 {
			lines[i] = l[ind:]
		} else {
			lines[i] = strings.TrimLeft(l, " ")
		}
	}
	sep := "\n"
	if header[0] == '>' {
		sep = " "
	}
	s := strings.Join(lines, sep)
	if !strings.HasSuffix(header, "-") {
		s = strings.TrimRight(s, "\n ") + "\n"
	} else {
		s = strings.TrimRight(s, "\n ")
	}
	return s
}

// Scalar types a plain scalar as PyYAML's resolver does.
func Scalar(s string) any {
	switch s {
	case "~", "null", "Null", "NULL":
		return nil
	case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON":
		return true
	case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF":
		return false
	case ".inf", ".Inf", ".INF", "+.inf":
		return math.Inf(1)
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1)
	case ".nan", ".NaN", ".NAN":
		return math.NaN()
	}
	clean := strings.ReplaceAll(s, "_", "")
	if i, err := strconv.ParseInt(clean, 0, 64); err == nil && clean != "" {
		return i
	}
	if looksFloat(clean) {
		if f, err := strconv.ParseFloat(clean, 64); err == nil {
			return f
		}
	}
	return s
}

func looksFloat(s string) bool {
	if s == "" {
		return false
	}
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
	return digits
}

// unquote reads a single- or double-quoted scalar.
func unquote(s string) (string, error) {
	if len(s) < 2 || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("unterminated quoted string %q", s)
	}
	body := s[1 : len(s)-1]
	if s[0] == '\'' {
		return strings.ReplaceAll(body, "''", "'"), nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(body) {
			return "", errors.New("a quoted string ends with a backslash")
		}
		i++
		switch body[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '"', '\\', '/':
			b.WriteByte(body[i])
		case '0':
			b.WriteByte(0)
		case 'u', 'x':
			n := map[byte]int{'u': 4, 'x': 2}[body[i]]
			if i+n >= len(body) {
				return "", fmt.Errorf("a short \\%c escape", body[i])
			}
			r, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil {
				return "", fmt.Errorf("a bad \\%c escape", body[i])
			}
			b.WriteRune(rune(r))
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(body[i])
		}
	}
	return b.String(), nil
}

// flowParser reads [a, b] and {k: v} collections.
type flowParser struct {
	s    string
	i    int
	line int
	p    *yamlParser
}

func (f *flowParser) skip() {
	for f.i < len(f.s) && f.s[f.i] == ' ' {
		f.i++
	}
}

func (f *flowParser) fail(what string) error {
	return fmt.Errorf("yaml: line %d: %s in the flow collection %q", f.line, what, f.s)
}

func (f *flowParser) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, f.fail("nesting deeper than 64")
	}
	if err := f.p.node(); err != nil {
		return nil, err
	}
	f.skip()
	if f.i >= len(f.s) {
		return nil, f.fail("a missing value")
	}
	switch f.s[f.i] {
	case '[':
		return f.list(depth)
	case '{':
		return f.dict(depth)
	case '"', '\'':
		q := f.s[f.i]
		j := f.i + 1
		for j < len(f.s) && f.s[j] != q {
			if f.s[j] == '\\' && q == '"' {
				j++
			}
			j++
		}
		if j >= len(f.s) {
			return nil, f.fail("an unterminated string")
		}
		v, err := unquote(f.s[f.i : j+1])
		f.i = j + 1
		return v, err
	case '&', '*', '!':
		return nil, f.fail("an anchor, alias or tag")
	}
	j := f.i
	for j < len(f.s) && !strings.ContainsRune(",]}", rune(f.s[j])) && !(f.s[j] == ':' && (j+1 == len(f.s) || f.s[j+1] == ' ')) {
		j++
	}
	v := Scalar(strings.TrimSpace(f.s[f.i:j]))
	f.i = j
	return v, nil
}

func (f *flowParser) list(depth int) (any, error) {
	f.i++
	out := []any{}
	for {
		f.skip()
		if f.i < len(f.s) && f.s[f.i] == ']' {
			f.i++
			return out, nil
		}
		v, err := f.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		f.skip()
		if f.i < len(f.s) && f.s[f.i] == ',' {
			f.i++
			continue
		}
		if f.i < len(f.s) && f.s[f.i] == ']' {
			f.i++
			return out, nil
		}
		return nil, f.fail("a missing , or ]")
	}
}

func (f *flowParser) dict(depth int) (any, error) {
	f.i++
	out := map[string]any{}
	for {
		f.skip()
		if f.i < len(f.s) && f.s[f.i] == '}' {
			f.i++
			return out, nil
		}
		k, err := f.value(depth + 1)
		if err != nil {
			return nil, err
		}
		f.skip()
		if f.i >= len(f.s) || f.s[f.i] != ':' {
			return nil, f.fail("a key without a value")
		}
		f.i++
		v, err := f.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprint(k)
		if _, dup := out[key]; dup {
			return nil, f.fail(fmt.Sprintf("key %q given twice", key))
		}
		out[key] = v
		f.skip()
		if f.i < len(f.s) && f.s[f.i] == ',' {
			f.i++
			continue
		}
		if f.i < len(f.s) && f.s[f.i] == '}' {
			f.i++
			return out, nil
		}
		return nil, f.fail("a missing , or }")
	}
}
