package vram

import (
	"strings"
	"testing"
)

// TestTRLVLLMRange: a TRL GRPO plan with a vLLM rollout says when the
// vLLM release it is modelled with lies outside the range the TRL release
// supports (trl/import_utils.py is_vllm_available), and says nothing when
// it lies inside.
func TestTRLVLLMRange(t *testing.T) {
	for _, c := range []struct {
		trl, vllm string
		warns     bool
	}{
		{"", "", true},              // TRL 1.16.0 (0.22.0-0.31.0), vLLM 0.34.0
		{"", "0.31.0", false},       // its upper bound
		{"", "0.22.0", false},       // its lower bound
		{"", "0.14.1", true},        // below it
		{"1.10.0", "0.26.0", false}, // 1.10.0: 0.17.0-0.26.0
		{"1.10.0", "0.33.0", true},
		{"0.25.0", "0.10.2", false}, // 0.25.0: exactly 0.10.2
		{"0.25.0", "0.11.0", true},
		{"0.27.0", "0.12.0", false}, // 0.27.0: 0.10.2-0.12.0
	} {
		p := Plan{Versions: Versions{TRL: c.trl}, PostTraining: &PostTraining{Framework: "trl",
			Rollout: &Rollout{Engine: "vllm", Version: c.vllm}}}
		rs, err := p.Releases()
		if err != nil {
			t.Fatalf("trl %q vllm %q: %v", c.trl, c.vllm, err)
		}
		var note string
		for _, m := range rs {
			if m.Library == "vllm" {
				note = m.Note
			}
		}
		if got := strings.Contains(note, "supports vLLM"); got != c.warns {
			t.Errorf("trl %q, vllm %q: the note %q, want a range warning: %v", c.trl, c.vllm, note, c.warns)
		}
		if c.warns && !strings.Contains(note, "post_training.rollout.version") {
			t.Errorf("trl %q, vllm %q: the note %q does not say how to name the release", c.trl, c.vllm, note)
		}
	}
}
