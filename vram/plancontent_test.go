package vram

import (
	"strings"
	"testing"
)

// TestParsePlanContent: a plan read from its content alone refuses a model
// read from a file or the network, naming the field, and reads the rest.
func TestParsePlanContent(t *testing.T) {
	for _, c := range []struct{ plan, want string }{
		{`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 128}}`, ""},
		{`{"model": {"hf_config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}}, "inference": {"batch": 1, "prompt_tokens": 16}}`, ""},
		{`{"model": "hf://meta-llama/Llama-3.1-8B", "inference": {"batch": 1, "prompt_tokens": 16}}`, "model: hf://meta-llama/Llama-3.1-8B needs the network"},
		{`{"model": {"hf_config": "/etc/passwd"}, "inference": {"batch": 1, "prompt_tokens": 16}}`, "model.hf_config: a path"},
		{`{"model": {"checkpoint": "/"}, "inference": {"batch": 1, "prompt_tokens": 16}}`, "model.checkpoint: a folder is a path"},
		{`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "extra": 1}`, "extra: unknown field"},
	} {
		_, err := ParsePlanContent([]byte(c.plan))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.plan, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.plan, err, c.want)
		}
	}
}

// TestPlanFileDraft: a draft model without its speculative_config is
// refused, named.
func TestPlanFileDraft(t *testing.T) {
	p, err := ParsePlanContent([]byte(`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 16}, "vllm": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.File(); err != nil {
		t.Fatal(err)
	}
	m := p.Model
	p.VLLM.Draft = &m
	if _, err := p.File(); err == nil || !strings.Contains(err.Error(), "needs speculative_config") {
		t.Errorf("a draft model written: %v", err)
	}
}
