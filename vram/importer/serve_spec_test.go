package importer

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// TestServeSpeculativeConfig: --speculative-config reaches the plan's
// vllm.speculative_config, and the plan file reads back to the same
// launch; a draft the catalog does not hold leaves it out, said.
func TestServeSpeculativeConfig(t *testing.T) {
	for _, tc := range []struct {
		line, method, model string
		k, kvLayers         int
	}{
		{`vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --speculative-config '{"method": "mtp", "num_speculative_tokens": 1}'`, "mtp", "", 1, 1},
		{`vllm serve meta-llama/Llama-3.1-8B --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'`, "ngram", "", 3, 0},
		{`vllm serve meta-llama/Llama-3.1-8B --speculative-config '{"method":"draft_model","model":"llama-3.2-1b","num_speculative_tokens":4}'`, "draft_model", `"llama-3.2-1b"`, 4, 16},
	} {
		imp, err := Import("serve.sh", []byte(tc.line), Options{GPU: "H200"})
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		v := imp.Plan.VLLM
		if s := v.Speculative; s == nil || s.Method != tc.method || s.NumSpeculativeTokens != tc.k || string(s.Model) != tc.model {
			t.Errorf("%s: %+v", tc.line, s)
			continue
		}
		c, err := v.Carve(*imp.Plan.Inference, mustGPU(t, "H200"))
		if err != nil || c.Speculative == nil || c.Speculative.KVLayers != tc.kvLayers {
			t.Errorf("%s: carve %+v, %v", tc.line, c.Speculative, err)
			continue
		}
		f, err := imp.Plan.File()
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		back, err := vram.ParsePlanContent(f)
		if err != nil {
			t.Errorf("%s: %s: %v", tc.line, f, err)
			continue
		}
		bc, err := back.VLLM.Carve(*back.Inference, mustGPU(t, "H200"))
		if err != nil || bc.Speculative == nil || back.VLLM.Speculative.Method != tc.method || bc.Weights != c.Weights || bc.Speculative.Buffers != c.Speculative.Buffers || bc.KVCache.Blocks != c.KVCache.Blocks {
			t.Errorf("%s: read back %s: %+v, %v", tc.line, f, bc.Speculative, err)
		}
		if strings.Contains(tc.line, "prompt_lookup_max") && !strings.Contains(strings.Join(imp.NotModelled, "\n"), "--speculative-config prompt_lookup_max 4: not modelled") {
			t.Errorf("%s: not modelled %q", tc.line, imp.NotModelled)
		}
	}
	imp, err := Import("serve.sh", []byte(`vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{"model":"RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3","method":"eagle3","num_speculative_tokens":3}'`), Options{})
	if err != nil || imp.Plan.VLLM.Speculative != nil || !strings.Contains(strings.Join(imp.NotModelled, "\n"), "the draft RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 is not modelled") {
		t.Errorf("an EAGLE head not in the catalog: %+v, %q, %v", imp.Plan.VLLM.Speculative, imp.NotModelled, err)
	}
	for line, want := range map[string]string{
		`vllm serve meta-llama/Llama-3.1-8B --speculative-config '{"method": "ngram", "num_speculative_tokens": "three"}'`: "--speculative-config num_speculative_tokens three",
		`vllm serve meta-llama/Llama-3.1-8B --speculative-config '{"method": 3}'`:                                          "--speculative-config method 3",
		`vllm serve meta-llama/Llama-3.1-8B --speculative-config 'mtp'`:                                                    "--speculative-config \"mtp\": want a JSON object",
	} {
		if _, err := Import("serve.sh", []byte(line), Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
}
