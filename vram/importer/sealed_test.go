package importer

import (
	"strings"
	"testing"
)

// TestSealed: a sealed import reads the config's content alone: a file the
// config names and a model from a path or the hub are refused naming what;
// a catalog model, named or found by its hub id, is read.
func TestSealed(t *testing.T) {
	for _, c := range []struct {
		name, data string
		opt        Options
		want       string // an error's words; "" reads
		noted      string // what NotModelled says
	}{
		{"axolotl.yml", "base_model: meta-llama/Meta-Llama-3-8B\nsequence_len: 2048\nmicro_batch_size: 1\nadapter: lora\nlora_r: 16\n", Options{}, "", ""},
		{"axolotl.yml", "base_model: meta-llama/Meta-Llama-3-8B\nsequence_len: 2048\nmicro_batch_size: 1\ndeepspeed: zero3.json\n", Options{}, "", "deepspeed = zero3.json: the DeepSpeed config could not be read (a file the config names is not read here"},
		{"axolotl.yml", "base_model: ./my-model\nsequence_len: 2048\nmicro_batch_size: 1\n", Options{}, `model "./my-model": a path or hub id is not read here`, ""},
		{"axolotl.yml", "base_model: /etc\nsequence_len: 2048\nmicro_batch_size: 1\n", Options{}, `model "/etc": a path`, ""},
		{"cmd.sh", "vllm serve meta-llama/Meta-Llama-3-8B-Instruct --max-model-len 8192", Options{GPU: "H100-80GB"}, "", ""},
		{"cmd.sh", "vllm serve meta-llama/Meta-Llama-3-8B-Instruct", Options{Model: "hf://meta-llama/Meta-Llama-3-8B", GPU: "H100-80GB"}, "a path or hub id is not read here", ""},
		{"cmd.sh", "vllm serve x", Options{Model: "config.json", GPU: "H100-80GB"}, "a path or hub id is not read here", ""},
	} {
		c.opt.Sealed = true
		imp, err := Import(c.name, []byte(c.data), c.opt)
		if c.noted != "" && !strings.Contains(strings.Join(imp.NotModelled, "\n"), c.noted) {
			t.Errorf("%q: not modelled %q, want %q", c.data, imp.NotModelled, c.noted)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.data, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want %q", c.data, err, c.want)
		}
	}
}
