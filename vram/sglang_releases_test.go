package vram

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// sglangReleasesRead are the SGLang releases whose wheels' srt/models
// were read for sglangArchitectures, oldest first (PyPI's list, 0.4.4 to
// 0.5.23, post releases included; 0.5.0 has only release candidates, and
// 0.5.0rc0 was read: its classes count from 0.5.1).
var sglangReleasesRead = []string{"0.4.4", "0.4.4.post1", "0.4.4.post2", "0.4.4.post3", "0.4.4.post4", "0.4.5", "0.4.5.post1",
	"0.4.5.post2", "0.4.5.post3", "0.4.6", "0.4.6.post1", "0.4.6.post2", "0.4.6.post3", "0.4.6.post4", "0.4.6.post5", "0.4.7",
	"0.4.7.post1", "0.4.8", "0.4.8.post1", "0.4.9", "0.4.9.post1", "0.4.9.post2", "0.4.9.post3", "0.4.9.post4", "0.4.9.post5",
	"0.4.9.post6", "0.4.10", "0.4.10.post1", "0.4.10.post2", "0.5.1", "0.5.1.post1", "0.5.1.post2", "0.5.1.post3", "0.5.2", "0.5.3", "0.5.3.post1", "0.5.3.post2", "0.5.3.post3", "0.5.4", "0.5.4.post1", "0.5.4.post2",
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

// TestSGLang04: the 0.4.x rows. 0.4.4 picks its fraction by the TP degree
// alone and its ModelRunner takes 0.95 of any fraction for a multimodal
// model; 0.4.9 keeps a reserve by the GPU's size back and takes 0.90 of
// its default for a multimodal model, Gemma 3 running text-only.
func TestSGLang04(t *testing.T) {
	h100, h200, rtx := mustGPU("H100-80GB"), mustGPU("H200"), mustGPU("RTX-4090")
	mib := func(g GPU) float64 { return float64(g.Memory) / float64(MiB) }
	round := func(f float64) float64 { return math.RoundToEven(f*1000) / 1000 }
	for _, c := range []struct {
		version, preset string
		tp              int
		g               GPU
		want            float64
	}{
		{"0.4.4", "llama-3.1-8b", 1, h100, 0.88},
		{"0.4.4", "llama-3.1-8b", 2, rtx, 0.87},
		{"0.4.4", "llama-3.1-8b", 4, h100, 0.85},
		{"0.4.4", "llama-3.1-8b", 8, h200, 0.81},
		{"0.4.4", "llama-3.1-8b", 16, h100, 0.79},
		{"0.4.4", "qwen2.5-vl-7b", 1, h100, 0.88}, // the 0.95 comes in prepare, on any fraction
		{"0.4.9", "llama-3.1-8b", 1, h100, round((mib(h100) - 10*1024) / mib(h100))},
		{"0.4.9", "llama-3.1-8b", 4, h100, round((mib(h100) - 11.5*1024) / mib(h100))},
		{"0.4.9", "llama-3.1-8b", 1, h200, round((mib(h200) - 12.5*1024) / mib(h200))},
		{"0.4.9", "llama-3.1-8b", 1, rtx, round((mib(rtx) - 2.9*1024) / mib(rtx))},
		{"0.4.9", "qwen2.5-vl-7b", 1, h100, round((mib(h100)-10*1024)/mib(h100)) * 0.90},
		{"0.4.9", "gemma-3-4b-it", 1, h100, round((mib(h100) - 10*1024) / mib(h100))}, // text-only by default
	} {
		s := SGLang{Version: c.version, TP: c.tp}
		got, why := s.memFraction(MustPreset(c.preset), mib(c.g), sglangRow(c.version, t))
		if math.Abs(got-c.want) > 1e-12 || !strings.Contains(why, "SGLang "+c.version) {
			t.Errorf("%s %s TP %d on %s: %v (%s), want %v", c.version, c.preset, c.tp, c.g.Name, got, why, c.want)
		}
	}

	// sglang#4826's log (0.4.4.post2, one H200): Gemma-3-4B-it with 131.08
	// GB free after 8.13 GB of weights, "#tokens: 834615, K size: 54.12
	// GB" — every layer a full-attention cell of 4 KV heads × 256 × 2 ×
	// bf16, the budget 0.88 × 0.95 of the free memory.
	gib := func(f float64) Bytes { return Bytes(f * float64(GiB)) }
	free, weights := gib(139.21), gib(8.13)
	p, err := SGLang{Version: "0.4.4.post2"}.KVPool(MustPreset("gemma-3-4b-it"), free, weights)
	if err != nil || math.Abs(p.MemFractionStatic-0.88*0.95) > 1e-12 || p.CellSize != 34*4*256*2*2 {
		t.Fatalf("0.4.4.post2 gemma-3-4b-it: %+v, %v", p, err)
	}
	if d := float64(p.Tokens)/834615 - 1; math.Abs(d) > 0.001 || len(p.Notes) == 0 || !strings.Contains(p.Notes[0], "0.95") {
		t.Errorf("0.4.4.post2 gemma-3-4b-it: %d tokens (%+.3f%% of the log's), notes %q", p.Tokens, 100*d, p.Notes)
	}
	// 0.4.4's ModelRunner lowers a fraction the launch sets, too.
	q, err := SGLang{Version: "0.4.4", MemFractionStatic: 0.8}.KVPool(MustPreset("qwen2.5-vl-7b"), 80*GiB, 16*GiB)
	if err != nil || math.Abs(q.MemFractionStatic-0.76) > 1e-12 {
		t.Errorf("0.4.4 qwen2.5-vl-7b at 0.8: %v, %v", q.MemFractionStatic, err)
	}

	for _, c := range []struct {
		name string
		s    SGLang
		m    Model
		want string
	}{
		{"no class, no fallback", SGLang{Version: "0.4.4"}, MustPreset("gemma-3-4b-it"), "no Transformers fallback (from 0.4.7)"},
		{"speculative", SGLang{Version: "0.4.9", Speculative: &SGLangSpeculative{Algorithm: "EAGLE"}}, MustPreset("llama-3.1-8b"), "speculative decoding under SGLang 0.4.9 is not modelled"},
	} {
		if _, err := c.s.KVPool(c.m, 80*GiB, 16*GiB); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
