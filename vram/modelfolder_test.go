package vram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ckTensor is one tensor a test checkpoint stores.
type ckTensor struct {
	name  string
	dtype string // safetensors dtype
	shape []int64
}

// writeCheckpoint writes config.json for m and the tensors into dir, as
// one model.safetensors or, with shards > 1, an index and that many shards.
func writeCheckpoint(t *testing.T, dir string, m Model, ts []ckTensor, shards int) {
	t.Helper()
	cfg, err := json.Marshal(m.HFConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	bits := map[string]int64{"BF16": 16, "F16": 16, "F32": 32, "F8_E4M3": 8, "I32": 32, "U8": 8}
	headers := make([]map[string]any, max(1, shards))
	ends := make([]int64, len(headers))
	weightMap := map[string]string{}
	for i, x := range ts {
		k := i % len(headers)
		if headers[k] == nil {
			headers[k] = map[string]any{}
		}
		n := int64(1)
		for _, d := range x.shape {
			n *= d
		}
		size := n * bits[x.dtype] / 8
		headers[k][x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int64{ends[k], ends[k] + size}}
		ends[k] += size
		weightMap[x.name] = shardName(k, len(headers))
	}
	for k, h := range headers {
		writeSafetensors(t, filepath.Join(dir, shardName(k, len(headers))), h)
	}
	if shards > 1 {
		idx, _ := json.Marshal(map[string]any{"weight_map": weightMap})
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func shardName(k, n int) string {
	if n == 1 {
		return "model.safetensors"
	}
	return "model-0000" + string(rune('1'+k)) + "-of-0000" + string(rune('0'+n)) + ".safetensors"
}

// asStored lists m's tensors as a checkpoint in dtype, with linear weights
// replaced by what quant makes of them.
func asStored(m Model, dtype string, quant func(t Tensor) []ckTensor) []ckTensor {
	var out []ckTensor
	for _, t := range m.Tensors() {
		if quant != nil && t.IsLinear() && t.Role != "lm_head" {
			if q := quant(t); q != nil {
				out = append(out, q...)
				continue
			}
		}
		out = append(out, ckTensor{t.Name, dtype, t.Shape})
	}
	return out
}

func tinyLlama() Model {
	return Model{Name: "tiny", Family: "llama", Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 256, MaxPosition: 128}
}

func TestCheckpointFolders(t *testing.T) {
	m := tinyLlama().Normalize()
	params := m.ParamCount()
	gptq := func(t Tensor) []ckTensor {
		out, in := t.Shape[0], t.Shape[1]
		stem := strings.TrimSuffix(t.Name, ".weight")
		return []ckTensor{{stem + ".qweight", "I32", []int64{in / 8, out}}, {stem + ".qzeros", "I32", []int64{in / 32, out / 8}},
			{stem + ".scales", "F16", []int64{in / 32, out}}, {stem + ".g_idx", "I32", []int64{in}}}
	}
	fp8 := func(t Tensor) []ckTensor {
		return []ckTensor{{t.Name, "F8_E4M3", t.Shape}, {t.Name + "_scale_inv", "F32", []int64{(t.Shape[0] + 127) / 128, (t.Shape[1] + 127) / 128}}}
	}
	for _, c := range []struct {
		name   string
		ts     []ckTensor
		shards int
		format string
	}{
		{"bf16", asStored(m, "BF16", nil), 1, "bf16"},
		{"sharded fp32", asStored(m, "F32", nil), 3, "fp32"},
		{"gptq", asStored(m, "F16", gptq), 2, "gptq/awq int4"},
		{"fp8 blocks", asStored(m, "BF16", fp8), 1, "fp8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ck")
			writeCheckpoint(t, dir, m, c.ts, c.shards)
			ck, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Format != c.format {
				t.Errorf("format %q, want %q", ck.Format, c.format)
			}
			if ck.Model.ParamCount() != params {
				t.Errorf("the config.json read back as %d parameters, want %d", ck.Model.ParamCount(), params)
			}
			var sum Bytes
			for _, b := range ck.Stored {
				sum += b
			}
			if sum != ck.Total || len(ck.Unused) != 0 {
				t.Errorf("stored %v of %v, unused %v", sum, ck.Total, ck.Unused)
			}
			in := Inference{Model: ck.Model, Batch: 1, PromptTokens: 16}.WithCheckpoint(ck)
			est, err := in.Estimate()
			if err != nil {
				t.Fatal(err)
			}
			if est.Weights != ck.Total {
				t.Errorf("weights %v, the checkpoint stores %v", est.Weights, ck.Total)
			}
			in.Weights = Quant{DType: FP32}
			if est2, _ := in.Estimate(); est2.Weights != FP32.Size(params) {
				t.Errorf("with weights fp32 named, %v, want %v", est2.Weights, FP32.Size(params))
			}
		})
	}
	t.Run("plan", func(t *testing.T) {
		dir := t.TempDir()
		writeCheckpoint(t, filepath.Join(dir, "models", "tiny"), m, asStored(m, "BF16", nil), 1)
		plan := `{"model": {"checkpoint": "models/tiny"}, "inference": {"batch": 2, "prompt_tokens": 64}}`
		p, err := ParsePlan([]byte(plan), dir)
		if err != nil {
			t.Fatal(err)
		}
		est, err := p.Inference.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if p.Checkpoint == nil || est.Weights != BF16.Size(params) {
			t.Errorf("weights %v, want the checkpoint's %v", est.Weights, BF16.Size(params))
		}
		for _, bad := range []string{`"../tiny"`, `"/etc"`, `"models/none"`, `""`} {
			_, err := ParsePlan([]byte(`{"model": {"checkpoint": `+bad+`}, "inference": {"batch": 1}}`), dir)
			if err == nil || !strings.Contains(err.Error(), "model.checkpoint") {
				t.Errorf("checkpoint %s: got %v, want an error naming model.checkpoint", bad, err)
			}
		}
		if _, err := ParsePlan([]byte(`{"model": {"checkpoint": "models/tiny", "layers": 2}, "inference": {"batch": 1}}`), dir); err == nil {
			t.Error("a checkpoint model with other fields should be refused")
		}
	})
}

func TestCheckpointMismatches(t *testing.T) {
	m := tinyLlama().Normalize()
	for _, c := range []struct {
		name string
		edit func([]ckTensor) []ckTensor
		want string
	}{
		{"missing tensor", func(ts []ckTensor) []ckTensor {
			return slicesDelete(ts, "model.layers.1.mlp.up_proj.weight")
		}, "tensor model.layers.1.mlp.up_proj.weight: the llama model declares it"},
		{"wrong shape", func(ts []ckTensor) []ckTensor {
			for i := range ts {
				if ts[i].name == "model.layers.0.self_attn.k_proj.weight" {
					ts[i].shape = []int64{64, 64}
				}
			}
			return ts
		}, "tensor model.layers.0.self_attn.k_proj.weight: the checkpoint stores shape [64 64]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ck")
			writeCheckpoint(t, dir, m, c.edit(asStored(m, "BF16", nil)), 1)
			_, err := OpenCheckpoint(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	t.Run("extra tensors are listed, not loaded", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ck")
		ts := append(asStored(m, "BF16", nil), ckTensor{"model.layers.2.mtp.weight", "BF16", []int64{64, 64}}, ckTensor{"model.rotary_emb.inv_freq", "F32", []int64{8}})
		writeCheckpoint(t, dir, m, ts, 1)
		ck, err := OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.Unused) != 1 || ck.Unused[0] != "model.layers.2.mtp.weight" {
			t.Errorf("unused %v", ck.Unused)
		}
	})
	t.Run("mxfp4 experts", func(t *testing.T) {
		g := Model{Name: "tiny-oss", Family: "gpt_oss", Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 64, Vocab: 256, MaxPosition: 256, Experts: 4, ExpertsPerToken: 2, SlidingWindow: 32, GlobalEvery: 2}.Normalize()
		var ts []ckTensor
		for _, x := range g.Tensors() {
			if x.Stacked > 0 && len(x.Shape) == 3 {
				e, a, b := x.Shape[0], x.Shape[1], x.Shape[2]
				// gpt-oss stores [experts, out, in/32, 16] 4-bit blocks and [experts, out, in/32] scales.
				ts = append(ts, ckTensor{x.Name + "_blocks", "U8", []int64{e, b, a / 32, 16}}, ckTensor{x.Name + "_scales", "U8", []int64{e, b, a / 32}})
				continue
			}
			ts = append(ts, ckTensor{x.Name, "BF16", x.Shape})
		}
		dir := filepath.Join(t.TempDir(), "ck")
		writeCheckpoint(t, dir, g, ts, 1)
		ck, err := OpenCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Format != "mxfp4" || ck.Total >= BF16.Size(g.ParamCount()) {
			t.Errorf("format %q, %v stored for %d parameters", ck.Format, ck.Total, g.ParamCount())
		}
	})
}

func slicesDelete(ts []ckTensor, name string) []ckTensor {
	out := ts[:0]
	for _, t := range ts {
		if t.name != name {
			out = append(out, t)
		}
	}
	return out
}
