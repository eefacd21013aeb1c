package vram

import (
	"fmt"
	"strings"
	"testing"
)

// llama3GGUF is the header of Meta-Llama-3-8B-Instruct in Ollama's q4_0
// build: 32 blocks of Q4_0 linears (norms in F32), a Q6_K output layer,
// a 128,256-token vocabulary, GQA with 8 KV heads of 128.
func llama3GGUF() *GGUF {
	g := &GGUF{Version: 3, Alignment: 32, Metadata: map[string]any{
		"general.architecture": "llama", "llama.block_count": int64(32), "llama.embedding_length": int64(4096),
		"llama.attention.head_count": int64(32), "llama.attention.head_count_kv": int64(8),
		"tokenizer.ggml.tokens": GGUFArray{Type: "string", Len: 128256},
	}}
	add := func(name string, typ GGMLType, dims ...int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		b, err := GGMLSize(typ, n)
		if err != nil {
			panic(err)
		}
		g.Tensors = append(g.Tensors, GGUFTensor{Name: name, Dims: dims, Type: typ, Bytes: b})
	}
	add("token_embd.weight", 2, 4096, 128256)
	for i := 0; i < 32; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_q.weight", 2, 4096, 4096)
		add(p+"attn_k.weight", 2, 4096, 1024)
		add(p+"attn_v.weight", 2, 4096, 1024)
		add(p+"attn_output.weight", 2, 4096, 4096)
		add(p+"ffn_gate.weight", 2, 4096, 14336)
		add(p+"ffn_up.weight", 2, 4096, 14336)
		add(p+"ffn_down.weight", 2, 14336, 4096)
		add(p+"attn_norm.weight", 0, 4096)
		add(p+"ffn_norm.weight", 0, 4096)
	}
	add("output_norm.weight", 0, 4096)
	add("output.weight", 14, 4096, 128256)
	return g
}

// TestOllamaLogs: Ollama's own estimate lines for Llama-3-8B
// (ollama/ollama logs quoted in issues; "offload to cuda … layers.model=33
// … memory.required.kv="1.0 GiB" … memory.weights.nonrepeating="411.0 MiB"
// memory.graph.full="560.0 MiB" memory.graph.partial="677.5 MiB"" with
// --ctx-size 8192 --batch-size 512 --parallel 4, i.e. num_ctx 2048 × 4).
func TestOllamaLogs(t *testing.T) {
	m, err := Ollama{NumCtx: 2048, NumParallel: 4}.Estimate(llama3GGUF())
	if err != nil {
		t.Fatal(err)
	}
	mib := func(b Bytes) string { return fmt.Sprintf("%.1f MiB", float64(b)/float64(MiB)) }
	for name, c := range map[string]struct {
		got  Bytes
		want string
	}{
		"kv": {m.KV, "1024.0 MiB"}, "graph.full": {m.GraphFull, "560.0 MiB"}, "graph.partial": {m.GraphPartial, "677.5 MiB"},
		"weights.nonrepeating": {m.WeightsNonRepeating, "411.0 MiB"},
	} {
		if mib(c.got) != c.want {
			t.Errorf("%s: %s, Ollama logs %s", name, mib(c.got), c.want)
		}
	}
	if m.Layers != 33 || m.Full != m.WeightsTotal+m.KV+m.GraphFull {
		t.Errorf("%+v", m)
	}
	// A q8_0 cache: one byte an element in Ollama's estimate (0.11.10
	// fs/ggml/ggml.go:793-794), half of f16.
	q8, _ := Ollama{NumCtx: 2048, NumParallel: 4, KVCacheType: "q8_0"}.Estimate(llama3GGUF())
	if q8.KV != m.KV/2 {
		t.Errorf("q8_0 KV %v, f16 %v", q8.KV, m.KV)
	}
}

// TestOllamaErrors: what the estimate cannot do is said, never guessed.
func TestOllamaErrors(t *testing.T) {
	g := llama3GGUF()
	if _, err := (Ollama{KVCacheType: "q5_1"}).Estimate(g); err == nil || !strings.Contains(err.Error(), "kv_cache_type") {
		t.Errorf("q5_1: %v", err)
	}
	other := llama3GGUF()
	other.Metadata["general.architecture"] = "qwen2"
	for k, v := range g.Metadata {
		if strings.HasPrefix(k, "llama.") {
			other.Metadata["qwen2."+strings.TrimPrefix(k, "llama.")] = v
		}
	}
	m, err := Ollama{}.Estimate(other)
	if err == nil || !strings.Contains(err.Error(), `not modelled for architecture "qwen2"`) || m.KV == 0 {
		t.Errorf("qwen2: %v, KV %v", err, m.KV)
	}
	delete(g.Metadata, "llama.block_count")
	if _, err := (Ollama{}).Estimate(g); err == nil || !strings.Contains(err.Error(), "block_count") {
		t.Errorf("no block count: %v", err)
	}
	huge := llama3GGUF()
	huge.Metadata["llama.attention.head_count_kv"] = int64(1 << 20)
	if _, err := (Ollama{NumCtx: 1 << 25, NumParallel: 1024}).Estimate(huge); err == nil {
		t.Error("an exabyte cache: no error")
	}
}

// TestOllamaOffload: with room for everything the 33 layers go on the GPU;
// with less, as many blocks as fit after the partial graph, in order.
func TestOllamaOffload(t *testing.T) {
	m, err := Ollama{NumCtx: 2048, NumParallel: 4}.Estimate(llama3GGUF())
	if err != nil {
		t.Fatal(err)
	}
	if n, used := m.Offload(80 * GiB); n != 33 || used != m.WeightsRepeating+m.KV+m.GraphFull+m.WeightsNonRepeating {
		t.Errorf("80 GiB: %d layers, %v", n, used)
	}
	free := m.GraphPartial + 10*(m.PerLayer[0]+m.KVPerLayer) + 1
	if n, used := m.Offload(free); n != 10 || used > free {
		t.Errorf("room for 10 blocks: %d layers, %v of %v", n, used, free)
	}
	if n, _ := m.Offload(m.GraphPartial); n != 0 {
		t.Errorf("no room: %d layers", n)
	}
}
