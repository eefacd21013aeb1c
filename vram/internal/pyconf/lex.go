package pyconf

import (
	"fmt"
	"strconv"
	"strings"
)

// The tokens of the Python subset that config modules are written in
// (python.go): names, numbers, strings, operators, and the NEWLINE,
// INDENT and DEDENT tokens of Python's layout rule, with lines joined
// inside brackets and after a backslash (the language reference's
// "Lexical analysis" chapter). Budget: maxPyTokens tokens.

type pyTokKind uint8

const (
	pyEOF pyTokKind = iota
	pyNewline
	pyIndent
	pyDedent
	pyNameTok
	pyNumber
	pyString
	pyFString // an f-string: kept as text, never evaluated
	pyOp
)

type pyToken struct {
	text string // the name, operator or the string's value
	line int32
	kind pyTokKind
}

// maxPyTokens bounds a module's tokens (a 4 MiB file has fewer).
const maxPyTokens = 1 << 20

type pyLexer struct {
	s       string
	i, line int
	depth   int   // open brackets
	indents []int // the indentation stack
	toks    []pyToken
}

func pyTokenize(src string) ([]pyToken, error) {
	// Room for a token a byte at once (a token takes at least a byte, but
	// for the layout's closing DEDENTs): grown by append, a long file's
	// tokens would be copied five times over.
	lx := &pyLexer{s: src, line: 1, indents: []int{0}, toks: make([]pyToken, 0, min(len(src), maxPyTokens)+16)}
	atLineStart := true
	for lx.i < len(lx.s) {
		if len(lx.toks) > maxPyTokens {
			return nil, fmt.Errorf("python: more than %d tokens, more than a config has", maxPyTokens)
		}
		if atLineStart && lx.depth == 0 {
			blank, err := lx.indent()
			if err != nil {
				return nil, err
			}
			if blank {
				continue
			}
			atLineStart = false
		}
		nl, err := lx.next()
		if err != nil {
			return nil, err
		}
		atLineStart = nl
	}
	if lx.depth > 0 {
		return nil, fmt.Errorf("python: a bracket opened before line %d does not close", lx.line)
	}
	if n := len(lx.toks); n > 0 && lx.toks[n-1].kind != pyNewline && lx.toks[n-1].kind != pyDedent {
		lx.emit(pyNewline, "")
	}
	for len(lx.indents) > 1 {
		lx.indents = lx.indents[:len(lx.indents)-1]
		lx.emit(pyDedent, "")
	}
	lx.emit(pyEOF, "")
	return lx.toks, nil
}

func (lx *pyLexer) emit(k pyTokKind, text string) {
	lx.toks = append(lx.toks, pyToken{kind: k, text: text, line: int32(lx.line)})
}

// indent measures a line's indentation and emits INDENT or DEDENTs; a
// blank or comment-only line emits nothing (blank is true, the line read).
func (lx *pyLexer) indent() (blank bool, err error) {
	col := 0
	for lx.i < len(lx.s) && (lx.s[lx.i] == ' ' || lx.s[lx.i] == '\t' || lx.s[lx.i] == '\f') {
		if lx.s[lx.i] == '\t' {
			col = (col/8 + 1) * 8
		} else if lx.s[lx.i] == ' ' {
			col++
		}
		lx.i++
	}
	if lx.i >= len(lx.s) || lx.s[lx.i] == '\n' || lx.s[lx.i] == '\r' || lx.s[lx.i] == '#' {
		lx.skipLine()
		return true, nil
	}
	top := lx.indents[len(lx.indents)-1]
	switch {
	case col > top:
		lx.indents = append(lx.indents, col)
		lx.emit(pyIndent, "")
	case col < top:
		for col < lx.indents[len(lx.indents)-1] {
			lx.indents = lx.indents[:len(lx.indents)-1]
			lx.emit(pyDedent, "")
		}
		if col != lx.indents[len(lx.indents)-1] {
			return false, fmt.Errorf("python: line %d: unindent does not match any outer indentation level", lx.line)
		}
	}
	return false, nil
}

// skipLine passes the rest of a line and its end.
func (lx *pyLexer) skipLine() {
	for lx.i < len(lx.s) && lx.s[lx.i] != '\n' {
		lx.i++
	}
	if lx.i < len(lx.s) {
		lx.i++
		lx.line++
	}
}

// next reads one token (or a line's end); nl says a logical line ended.
func (lx *pyLexer) next() (nl bool, err error) {
	c := lx.s[lx.i]
	switch {
	case c == ' ' || c == '\t' || c == '\f' || c == '\r':
		lx.i++
	case c == '#':
		for lx.i < len(lx.s) && lx.s[lx.i] != '\n' {
			lx.i++
		}
	case c == '\n':
		lx.i++
		if lx.depth == 0 {
			lx.emit(pyNewline, "")
			lx.line++
			return true, nil
		}
		lx.line++
	case c == '\\' && lx.i+1 < len(lx.s) && (lx.s[lx.i+1] == '\n' || lx.s[lx.i+1] == '\r'):
		lx.i += 2
		if lx.i < len(lx.s) && lx.s[lx.i-1] == '\r' && lx.s[lx.i] == '\n' {
			lx.i++
		}
		lx.line++
	case isPyNameStart(c):
		return false, lx.nameOrString()
	case c >= '0' && c <= '9' || c == '.' && lx.i+1 < len(lx.s) && lx.s[lx.i+1] >= '0' && lx.s[lx.i+1] <= '9':
		lx.number()
	case c == '"' || c == '\'':
		return false, lx.str("")
	default:
		return false, lx.op()
	}
	return false, nil
}

func isPyNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isPyNameChar(c byte) bool { return isPyNameStart(c) || c >= '0' && c <= '9' }

// nameOrString reads a name, or a string with its prefix (r, b, f, u).
func (lx *pyLexer) nameOrString() error {
	start := lx.i
	for lx.i < len(lx.s) && isPyNameChar(lx.s[lx.i]) {
		lx.i++
	}
	word := lx.s[start:lx.i]
	if lx.i < len(lx.s) && (lx.s[lx.i] == '"' || lx.s[lx.i] == '\'') && len(word) <= 2 &&
		strings.Trim(strings.ToLower(word), "rbfu") == "" {
		return lx.str(strings.ToLower(word))
	}
	lx.emit(pyNameTok, word)
	return nil
}

func (lx *pyLexer) number() {
	start := lx.i
	for lx.i < len(lx.s) {
		c := lx.s[lx.i]
		exp := (c == '+' || c == '-') && lx.i > start && strings.ContainsRune("eE", rune(lx.s[lx.i-1])) &&
			!strings.HasPrefix(strings.ToLower(lx.s[start:]), "0x")
		if !(isPyNameChar(c) || c == '.' || exp) {
			break
		}
		lx.i++
	}
	lx.emit(pyNumber, lx.s[start:lx.i])
}

// str reads a string literal after its prefix: single or triple quoted,
// with the common escapes unless raw.
func (lx *pyLexer) str(prefix string) error {
	q := lx.s[lx.i : lx.i+1]
	if strings.HasPrefix(lx.s[lx.i:], q+q+q) {
		q = q + q + q
	}
	lx.i += len(q)
	startLine := lx.line
	var b strings.Builder
	for {
		if lx.i >= len(lx.s) {
			return fmt.Errorf("python: line %d: a string that does not end", startLine)
		}
		if strings.HasPrefix(lx.s[lx.i:], q) {
			lx.i += len(q)
			break
		}
		c := lx.s[lx.i]
		if c == '\n' {
			if len(q) == 1 {
				return fmt.Errorf("python: line %d: a string that does not end on its line", startLine)
			}
			lx.line++
		}
		if c == '\\' && lx.i+1 < len(lx.s) {
			if lx.s[lx.i+1] == '\n' {
				lx.line++
			}
			if !strings.Contains(prefix, "r") {
				b.WriteString(pyEscape(lx.s[lx.i+1]))
				lx.i += 2
				continue
			}
			b.WriteString(lx.s[lx.i : lx.i+2])
			lx.i += 2
			continue
		}
		b.WriteByte(c)
		lx.i++
	}
	kind := pyString
	if strings.Contains(prefix, "f") {
		kind = pyFString
	}
	lx.toks = append(lx.toks, pyToken{kind: kind, text: b.String(), line: int32(startLine)})
	return nil
}

func pyEscape(c byte) string {
	switch c {
	case 'n':
		return "\n"
	case 't':
		return "\t"
	case '\n':
		return ""
	case '\\', '\'', '"':
		return string(c)
	}
	return "\\" + string(c)
}

// pyOps are the operators and delimiters, longest first.
var pyOps = []string{"**=", "//=", ">>=", "<<=", "...", "->", "**", "//", "==", "!=", "<=", ">=", "<<", ">>",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", ":=",
	"(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "@", "=", "+", "-", "*", "/", "%", "&", "|", "^", "~", "<", ">"}

func (lx *pyLexer) op() error {
	for _, o := range pyOps {
		if strings.HasPrefix(lx.s[lx.i:], o) {
			switch o {
			case "(", "[", "{":
				lx.depth++
			case ")", "]", "}":
				if lx.depth == 0 {
					return fmt.Errorf("python: line %d: %q closes nothing", lx.line, o)
				}
				lx.depth--
			}
			lx.i += len(o)
			lx.emit(pyOp, o)
			return nil
		}
	}
	return fmt.Errorf("python: line %d: unexpected character %s", lx.line, strconv.QuoteRune(rune(lx.s[lx.i])))
}
