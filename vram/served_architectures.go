package vram

import (
	"regexp"
	"strconv"
)

// servedArchitecture says which releases of a serving engine run a family
// whose support is not every modelled release's, one table per engine
// (vllmArchitectures, sglangArchitectures): since is the first release
// whose model registry has the family's architecture (empty: every
// release read has it), until the last that ran it (empty: none dropped
// it), never that no release read has it; names are the architectures
// as the engine's registry names them, source where each was read.
type servedArchitecture struct {
	since  string
	until  string
	never  bool
	names  string
	source string
}

// archSupport is whether a release runs a family's architecture.
type archSupport int

const (
	archRuns    archSupport = iota
	archNotYet              // the release predates since, or never
	archDropped             // the release is after until
)

// support says whether the release asked (lib's version string) runs the
// architecture.
func (a servedArchitecture) support(lib, asked string) (archSupport, error) {
	if _, err := ParseVersion(lib, asked); err != nil {
		return archRuns, err
	}
	switch {
	case a.never:
		return archNotYet, nil
	case a.since != "" && releaseBefore(lib, asked, a.since):
		return archNotYet, nil
	case a.until != "" && releaseBefore(lib, a.until, asked):
		return archDropped, nil
	}
	return archRuns, nil
}

// servedFamily is the family whose architecture the checkpoint names: a
// vision-language model's wrapper, else the model's own.
func servedFamily(m Model) string {
	if v := m.Vision; v != nil && v.Family != "" {
		return v.Family
	}
	return m.Family
}

// postPattern is a post release's suffix (SGLang's 0.5.4.post2).
var postPattern = regexp.MustCompile(`\.post(\d{1,9})$`)

// releaseBefore reports whether release a is older than b, both valid
// releases of lib; post releases of one release are told apart (Version
// is not: SGLang added KimiLinearForCausalLM in 0.5.4.post2).
func releaseBefore(lib, a, b string) bool {
	va, _ := ParseVersion(lib, a)
	vb, _ := ParseVersion(lib, b)
	if va != vb {
		return va.Less(vb)
	}
	return postOf(a) < postOf(b)
}

// postOf is a release's post number, 0 for none.
func postOf(s string) int {
	m := postPattern.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
