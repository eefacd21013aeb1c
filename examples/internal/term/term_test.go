package term

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSafeShowsControls: ESC, OSC, BEL, CR, DEL and C1 controls are shown
// as escapes; newlines, tabs and other UTF-8 pass unchanged.
func TestSafeShowsControls(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain · 1.5 GiB — 中文\tok\n", "plain · 1.5 GiB — 中文\tok\n"},
		{"\x1b[32mall checks passed\x1b[0m", `\x1b[32mall checks passed\x1b[0m`},
		{"\x1b]0;pwned\a", `\x1b]0;pwned\x07`},
		{"fits\rdoes not fit", `fits\x0ddoes not fit`},
		{"a\x7fb\u009bc", `a\x7fb\u009bc`},
		{"°\xc2", "°\xc2"},
	} {
		var b bytes.Buffer
		if _, err := fmt.Fprint(Safe(&b), c.in); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%q: got %q, want %q", c.in, b.String(), c.want)
		}
	}
}
