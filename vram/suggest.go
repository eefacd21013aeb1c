package vram

import (
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// closest returns the candidates nearest to s (case-insensitive edit
// distance), best first: those within a third of s's length, at most three.
// It backs every "did you mean …?" in an error message.
func closest(s string, candidates []string) []string {
	s = strings.ToLower(s)
	if s == "" || utf8.RuneCountInString(s) > 200 {
		return nil
	}
	limit := max(2, utf8.RuneCountInString(s)/3)
	type scored struct {
		name string
		d    int
	}
	var hits []scored
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(s, lc)
		if strings.Contains(lc, s) || strings.Contains(s, lc) {
			d = min(d, 1)
		}
		if d <= limit {
			hits = append(hits, scored{c, d})
		}
	}
	// The nearest only; among equals, the longest shared prefix first.
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].d != hits[j].d {
			return hits[i].d < hits[j].d
		}
		return commonPrefix(s, strings.ToLower(hits[i].name)) > commonPrefix(s, strings.ToLower(hits[j].name))
	})
	var out []string
	for i := 0; i < len(hits) && i < 3 && hits[i].d == hits[0].d; i++ {
		out = append(out, hits[i].name)
	}
	return out
}

// didYouMean is closest as a clause for an error message: `; did you mean
// "x"?`, `; did you mean "x" or "y"?`, or "" when nothing is close.
func didYouMean(s string, candidates []string) string {
	c := closest(s, candidates)
	if len(c) == 0 {
		return ""
	}
	q := make([]string, len(c))
	for i, x := range c {
		q[i] = `"` + x + `"`
	}
	return "; did you mean " + strings.Join(q, " or ") + "?"
}

// didYouMeanSameKind is didYouMean among the candidates of s's kind: the
// same name before the first digit, and the same generation and size,
// told by the digits (a candidate's runs of digits start with s's), so
// "llama-2-7bb" finds "llama-2-7b" and "h100" the H100s, but "qwen3.5-27b"
// never "qwen2.5-7b", nor "B300" "B200", nor "GB10" "A10".
func didYouMeanSameKind(s string, candidates []string) string {
	if len(s) > 200 {
		return "" // closest compares no longer names
	}
	want, lead := digitRuns(s), leadOf(s)
	var same []string
	for _, c := range candidates {
		if have := digitRuns(c); len(have) >= len(want) && slices.Equal(have[:len(want)], want) && sameLead(leadOf(c), lead) {
			same = append(same, c)
		}
	}
	return didYouMean(s, same)
}

// sameLead tells names that start alike: the same letters, one typo apart
// or two swapped ("gtp2" is "gpt2"; "GB10" is no "A10").
func sameLead(a, b string) bool {
	if a == b || editDistance(a, b) <= 1 {
		return true
	}
	ra, rb := []rune(a), []rune(b)
	slices.Sort(ra)
	slices.Sort(rb)
	return slices.Equal(ra, rb)
}

// leadOf is s's letters before its first digit, lower case.
func leadOf(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= '0' && r <= '9' {
			break
		}
		if r >= 'a' && r <= 'z' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// digitRuns are s's runs of digits ("qwen3.5-27b": 3, 5, 27).
func digitRuns(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
}

// nearestFamilies are the supported families whose name, without its
// digits and underscores, is mt's ("gemma5" → gemma, gemma2, gemma3,
// gemma3_text, gemma4, …): earlier generations of a model type the engine
// lacks.
func nearestFamilies(mt string) []string {
	stem := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
				return -1
			}
			return r
		}, strings.ToLower(s))
	}
	var out []string
	for _, f := range Families() {
		if stem(f) == stem(mt) || strings.HasPrefix(stem(f), stem(mt)) && stem(mt) != "" && len(stem(mt)) >= 4 {
			out = append(out, f)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (runes).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
