package vram

import (
	"slices"
	"strings"
	"testing"
)

// sglangReleasesRead are the SGLang releases whose wheels' srt/models
// were read for sglangArchitectures, oldest first (PyPI's list, 0.5.3 to
// 0.5.23, post releases included).
var sglangReleasesRead = []string{"0.5.3", "0.5.3.post1", "0.5.3.post2", "0.5.3.post3", "0.5.4", "0.5.4.post1", "0.5.4.post2",
	"0.5.4.post3", "0.5.5", "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6", "0.5.6.post1", "0.5.6.post2", "0.5.7", "0.5.8",
	"0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14",
	"0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"}

// TestSGLangArchitectures walks sglangArchitectures: a plan of each
// listed family, at each modelled row, at the release that first has its
// class and at the one before it, is refused in words naming the release,
// the family and the fallback exactly when the release comes before since
// in the releases read (or never has the class), and sized (or refused
// for another reason) otherwise.
func TestSGLangArchitectures(t *testing.T) {
	for family, a := range sglangArchitectures {
		m, ok := presetOfFamily(family)
		if !ok {
			t.Errorf("%s: no preset of the family", family)
			continue
		}
		first := slices.Index(sglangReleasesRead, a.since)
		if a.never != (first < 0) || first == 0 {
			t.Errorf("%s: since %q is not a release read after the oldest (never %v)", family, a.since, a.never)
			continue
		}
		releases := []string{}
		for _, r := range sglangReleases {
			releases = append(releases, r.Version)
		}
		if first > 0 {
			releases = append(releases, a.since, sglangReleasesRead[first-1])
		}
		for _, rel := range releases {
			_, err := (SGLang{Version: rel, TP: 8, MemFractionStatic: 0.8}).KVPool(m, 140*GiB, 10*GiB)
			want := ""
			if i := slices.Index(sglangReleasesRead, rel); a.never || i < first {
				want = "SGLang " + rel + " has no class for " + family + " (no " + a.names
			}
			switch {
			case want == "" && err != nil && strings.Contains(err.Error(), "has no class"):
				t.Errorf("%s on SGLang %s: %v", family, rel, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Transformers fallback")):
				t.Errorf("%s on SGLang %s: %v, want %q", family, rel, err, want)
			}
		}
	}
}
