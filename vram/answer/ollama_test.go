package answer

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// A plan's ollama section answers with Ollama 0.32.15's placement (the
// newest release unnamed), names the release, reads back from its plan
// file, and a release that sizes up front says it reads a GGUF header.
// Mistral-7B at Q4_0 on 16 GiB, by hand: the default num_ctx is 4096
// (under 23 GiB); a block's weights are 122,716,160 bytes (q and o
// 4096², k and v 4096·1024, gate, up and down 4096·14336 at 18 bytes per
// 32, two F32 norms), the output 4096·32000 at Q4_0 and its norm
// 73,744,384; the cache 32 layers of 2 · 1024 · 4096 · 2 bytes. All 33
// layers fit.
func TestOllamaPlan(t *testing.T) {
	const model = `"model": {"family": "mistral", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 32000, "max_position": 32768}`
	const in = `"inference": {"batch": 1, "prompt_tokens": 512, "new_tokens": 16}`
	const ollama = `"ollama": {"device_free": ["16 GiB"], "device_total": ["16 GiB"], "weight_type": "Q4_0"}`
	p, err := vram.ParsePlanContent([]byte(`{` + model + `, ` + in + `, ` + ollama + `}`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := For(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Ollama
	if o == nil || o.NumCtx != 4096 || o.Fit.Status != "unchanged" || o.CPULayers != 0 || o.Args != "-c 4096 -np 1 --flash-attn auto -b 512 -ub 512" {
		t.Fatalf("placement: %+v", o)
	}
	if d := o.Fit.Devices[0]; d.Layers != 33 || d.Model != 32*122716160+73744384 || d.Context != 32*2*1024*4096*2 {
		t.Errorf("device: %+v", d)
	}
	found := false
	for _, r := range rep.Releases {
		found = found || r.Library == "ollama" && r.Release == "0.32.15"
	}
	if !found {
		t.Errorf("releases %+v lack ollama 0.32.15", rep.Releases)
	}
	file, err := p.File()
	if err != nil || !strings.Contains(string(file), `"ollama"`) {
		t.Errorf("plan file: %s, %v", file, err)
	}
	for _, c := range []struct{ plan, want string }{
		{`{` + model + `, ` + in + `, ` + ollama + `, "versions": {"ollama": "0.11.10"}}`, "versions.ollama 0.11.10 sizes the model up front"},
		{`{` + model + `, ` + in + `, "ollama": {"device_free": ["16 GiB"], "numctx": 1}}`, "ollama.numctx"},
		{`{` + model + `, "train": {"seq_len": 512, "micro_batch": 1}, "ollama": {}}`, "ollama: applies to an inference plan"},
		{`{` + model + `, ` + in + `, "ollama": {"device_free": ["16 GiB"], "num_gpu": 0}}`, "num_gpu 0"},
		{`{` + model + `, ` + in + `, "ollama": {"device_free": ["16 GiB"]}}`, "device_total"},
		{`{` + model + `, ` + in + `, ` + ollama + `, "versions": {"ollama": "latest"}}`, "versions.ollama"},
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
