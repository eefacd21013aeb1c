// Package term keeps a terminal safe from what users and downloaded
// configs wrote: the commands print through Safe, which shows every
// control character (ESC and the rest of C0, DEL, C1) as an escape such as
// \x1b instead of passing it to the terminal, where a model name or a flag
// value could otherwise recolour the output ("all checks passed" in
// green), retitle the window or overwrite lines. Newlines and tabs pass.
//
//	w := term.Safe(os.Stdout)
//	fmt.Fprintln(w, name) // "\x1b]0;pwned\a" prints as \x1b]0;pwned\x07
package term

import (
	"fmt"
	"io"
)

// Safe wraps w: what is written reaches w with its control characters
// shown as escapes. It is the one place the commands' output is cleaned.
func Safe(w io.Writer) io.Writer { return &safe{w: w} }

type safe struct{ w io.Writer }

// Write cleans each write on its own (the commands print whole strings,
// so a character is never split between writes).
func (s *safe) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+8)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f: // U+0080–U+009F, C1 controls
			out = append(out, fmt.Sprintf(`\u%04x`, p[i+1])...)
			i++
		case c == '\n' || c == '\t':
			out = append(out, c)
		case c < 0x20 || c == 0x7f:
			out = append(out, fmt.Sprintf(`\x%02x`, c)...)
		default:
			out = append(out, c)
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
