package importer

import (
	"reflect"
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

// TestServeSGLangSpeculative: launch_server's --speculative-* flags reach
// the plan's sglang.speculative, from a command line and from both
// releases' server_args lines, and the plan file reads back to the same
// pool; the served model's own path is its own MTP layer; a draft the
// catalog does not hold leaves speculative decoding out, said.
func TestServeSGLangSpeculative(t *testing.T) {
	const ds = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
	for _, tc := range []struct {
		name, line, alg, draft string
		steps, topk, tokens    int
		kvLayers               int
	}{
		{"nextn", ds + "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4", "NEXTN", "", 3, 1, 4, 1},
		// SGLang's own fill-in of the draft path (as its server_args print it).
		{"own path", ds + "--speculative-algorithm EAGLE --speculative-draft-model-path deepseek-ai/DeepSeek-V3", "EAGLE", "", 0, 0, 0, 1},
		{"standalone", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --speculative-algorithm STANDALONE --speculative-draft-model meta-llama/Llama-3.2-1B --speculative-draft-kv-cache-dtype fp8_e4m3", "STANDALONE", `"meta-llama/Llama-3.2-1B"`, 0, 0, 0, 16},
		{"ngram", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --speculative-algorithm NGRAM --speculative-num-draft-tokens 16", "NGRAM", "", 0, 0, 16, 0},
	} {
		imp, err := Import("serve.sh", []byte(tc.line), Options{GPU: "H200"})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		s := imp.Plan.SGLang
		c := s.Speculative
		if c == nil || c.Algorithm != tc.alg || string(c.DraftModelPath) != tc.draft || c.NumSteps != tc.steps || c.EagleTopK != tc.topk || c.NumDraftTokens != tc.tokens {
			t.Errorf("%s: %+v", tc.name, c)
			continue
		}
		pool, err := s.Carve(*imp.Plan.Inference, mustGPU(t, "H200"))
		if err != nil || pool.Speculative == nil || pool.Speculative.KVLayers != tc.kvLayers {
			t.Errorf("%s: carve %+v, %v", tc.name, pool.Speculative, err)
			continue
		}
		f, err := imp.Plan.File()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		back, err := vram.ParsePlanContent(f)
		if err != nil {
			t.Errorf("%s: %s: %v", tc.name, f, err)
			continue
		}
		bp, err := back.SGLang.Carve(*back.Inference, mustGPU(t, "H200"))
		if err != nil || bp.Speculative == nil || bp.Tokens != pool.Tokens || bp.Speculative.Weights != pool.Speculative.Weights || bp.Speculative.KVBytes != pool.Speculative.KVBytes {
			t.Errorf("%s: read back %s: %+v, %v", tc.name, f, bp.Speculative, err)
		}
	}
	imp, err := Import("serve.sh", []byte("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 --speculative-draft-model-path jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B --speculative-token-map hot.pt"), Options{})
	if err != nil || imp.Plan.SGLang.Speculative != nil || !strings.Contains(strings.Join(imp.NotModelled, "\n"), "the draft jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B is not modelled") ||
		!strings.Contains(strings.Join(imp.NotModelled, "\n"), "--speculative-token-map hot.pt: a reduced draft vocabulary") {
		t.Errorf("an EAGLE-3 head not in the catalog: %+v, %q, %v", imp.Plan.SGLang.Speculative, imp.NotModelled, err)
	}
	if _, err := Import("serve.sh", []byte(ds+"--speculative-algorithm EAGLE --speculative-num-steps three"), Options{}); err == nil || !strings.Contains(err.Error(), "--speculative-num-steps \"three\"") {
		t.Errorf("num steps three: %v", err)
	}
}

// TestSGLangSpecServerArgs: both releases' server_args lines, as SGLang
// prints them once it resolved NEXTN to EAGLE, filled the draft path with
// the model's, the steps and the 48 running requests, import to the plan
// the command line they stand for makes.
func TestSGLangSpecServerArgs(t *testing.T) {
	const command = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 --max-running-requests 48 --speculative-algorithm EAGLE " +
		"--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
	for release, line := range map[string]string{
		"0.5.3": "[2025-10-06 12:00:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=8, max_running_requests=48, speculative_algorithm='EAGLE', " +
			"speculative_draft_model_path='deepseek-ai/DeepSeek-V3', speculative_draft_model_revision=None, speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, speculative_token_map=None)",
		"0.5.23": "[2026-04-02 12:00:00] server_args={'model_path': 'deepseek-ai/DeepSeek-V3', 'tp_size': 8, 'max_running_requests': 48, 'speculative_algorithm': 'EAGLE', " +
			"'speculative_draft_model_path': 'deepseek-ai/DeepSeek-V3', 'speculative_draft_model_revision': 'main', 'speculative_num_steps': 3, 'speculative_eagle_topk': 1, " +
			"'speculative_num_draft_tokens': 4, 'speculative_draft_kv_cache_dtype': None, 'enable_multi_layer_eagle': False}",
	} {
		m := sglangArgs.FindStringSubmatch(line)
		args, defaults, err := sglangServerArgs(m[1])
		if err != nil || defaults != release {
			t.Fatalf("%s: %s read against %s's defaults, %v", release, args, defaults, err)
		}
		opt := Options{Kind: KindSGLang, GPU: "H200", Sealed: true}
		fromLog, err := Import("log.sh", []byte(args), opt)
		if err != nil {
			t.Fatalf("%s: %s: %v", release, args, err)
		}
		fromCommand, err := Import("serve.sh", []byte(command), opt)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromLog.Plan, fromCommand.Plan) {
			t.Errorf("%s: the log's plan\n%+v\nis not the command line's\n%+v\n(args %s)", release, *fromLog.Plan.SGLang, *fromCommand.Plan.SGLang, args)
		}
		if c := fromLog.Plan.SGLang.Speculative; c == nil || c.Algorithm != "EAGLE" || len(c.DraftModelPath) != 0 || c.NumSteps != 3 {
			t.Errorf("%s: %+v", release, c)
		}
	}
}
