package charts

import (
	"fmt"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// Printf, Println and Print print as fmt's do, in the notebook's language:
// in a Chinese tutorial (Lang "zh") a format string or a leading text the
// catalog knows (zhPrint) prints in Chinese with the same arguments, so the
// numbers are the same; an engine's description of a moment of the step
// ("iteration 2, backward, block 3") and a breakdown's categories are
// translated too. What the catalog lacks prints as given.
func Printf(format string, a ...any) { fmt.Print(sprintf(format, a...)) }

// Println is fmt.Println in the notebook's language.
func Println(a ...any) { fmt.Println(localArgs(a, true)...) }

// Print is fmt.Print in the notebook's language.
func Print(a ...any) { fmt.Print(localArgs(a, false)...) }

func sprintf(format string, a ...any) string {
	if Lang == "zh" {
		if t, ok := zhPrint[format]; ok {
			format = t
		}
	}
	return fmt.Sprintf(format, localArgs(a, false)...)
}

// localArgs translates the arguments that carry words: a text the catalog
// knows (the leading one of a Println), a moment of the step, a breakdown.
func localArgs(a []any, lead bool) []any {
	if Lang != "zh" {
		return a
	}
	out := make([]any, len(a))
	for i, x := range a {
		switch v := x.(type) {
		case string:
			if t, ok := zhPrint[v]; ok && (lead && i == 0 || !lead) {
				out[i] = t
			} else {
				out[i] = trWhere(v)
			}
		case vram.Breakdown:
			out[i] = breakdownZh(v.String())
		default:
			out[i] = x
		}
	}
	return out
}

// breakdownZh translates a printed breakdown's category names, line by line.
func breakdownZh(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, cat := range []string{"optimizer states", "parameters", "gradients", "activations", "kv cache", "temporaries", "other", "total"} {
			if strings.HasPrefix(l, cat+" ") && len(l) > 17 {
				// The name's column is 17 wide (Breakdown.String); a Chinese
				// character takes two.
				zh := orSame(zhWords[cat], cat)
				lines[i] = zh + strings.Repeat(" ", max(1, 17-2*len([]rune(zh)))) + l[17:]
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}
