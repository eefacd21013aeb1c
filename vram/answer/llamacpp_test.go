package answer

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// A plan's llama_cpp section answers with llama.cpp's fit, the build from
// versions.llama_cpp (b10573 unnamed: the fit on by default), and reads
// back from its plan file.
func TestLlamaCppFitPlan(t *testing.T) {
	const model = `"model": {"family": "mistral", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 32000, "max_position": 32768}`
	const in = `"inference": {"batch": 1, "prompt_tokens": 512, "new_tokens": 16}`
	p, err := vram.ParsePlanContent([]byte(`{` + model + `, ` + in + `, "llama_cpp": {"device_free": ["16 GiB"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := For(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := rep.LlamaCppFit
	if f == nil || f.Status != "fitted" || f.CtxSize != 14336 || f.Args != "-c 14336 -ngl -1" {
		t.Fatalf("fit: %+v", f)
	}
	found := false
	for _, r := range rep.Releases {
		found = found || r.Library == "llama_cpp" && r.Release == "b10573"
	}
	if !found {
		t.Errorf("releases %+v lack llama_cpp b10573", rep.Releases)
	}
	file, err := p.File()
	if err != nil || !strings.Contains(string(file), `"llama_cpp"`) {
		t.Errorf("plan file: %s, %v", file, err)
	}
	old, err := vram.ParsePlanContent([]byte(`{` + model + `, ` + in + `, "llama_cpp": {"device_free": ["16 GiB"]}, "versions": {"llama_cpp": "b6173"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := For(old, nil); err != nil || rep.LlamaCppFit == nil || rep.LlamaCppFit.Status != "off" {
		t.Errorf("b6173: %+v, %v", rep.LlamaCppFit, err)
	}
	for _, c := range []struct{ plan, want string }{
		{`{` + model + `, ` + in + `, "llama_cpp": {"fit_ctx": 4096, "fitctx": 1}}`, "llama_cpp.fitctx"},
		{`{` + model + `, "train": {"seq_len": 512, "micro_batch": 1}, "llama_cpp": {}}`, "llama_cpp: applies to an inference plan"},
		{`{` + model + `, ` + in + `, "llama_cpp": {"device_free": ["16 GiB"], "fit_target": [-1]}}`, "fit_target"},
	} {
		p, err := vram.ParsePlanContent([]byte(c.plan))
		if err == nil {
			_, err = For(p, nil)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.plan, err, c.want)
		}
	}
}
