package vram

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// Tests for the second hardening audit: each reader of a downloaded file
// stays within its budget on the inputs that once made it hang or take
// gigabytes.

// nestedGGUF is a header whose one key holds arrays nested four deep, 64
// at each level (64⁴ values): what a 200 MB header did at full size.
func nestedGGUF(levels int) []byte {
	var b bytes.Buffer
	b.WriteString("GGUF")
	le(&b, uint32(3), uint64(0), uint64(1), uint64(1))
	b.WriteString("k")
	binary.Write(&b, binary.LittleEndian, uint32(9))
	var arr func(depth int)
	arr = func(depth int) {
		if depth == levels {
			binary.Write(&b, binary.LittleEndian, uint32(0)) // uint8 elements
			binary.Write(&b, binary.LittleEndian, uint64(64))
			b.Write(make([]byte, 64))
			return
		}
		binary.Write(&b, binary.LittleEndian, uint32(9))
		binary.Write(&b, binary.LittleEndian, uint64(64))
		for i := 0; i < 64; i++ {
			arr(depth + 1)
		}
	}
	arr(1)
	return b.Bytes()
}

// le writes each value little-endian.
func le(b *bytes.Buffer, vs ...any) {
	for _, v := range vs {
		binary.Write(b, binary.LittleEndian, v)
	}
}

// TestGGUFNestedArraysBounded: arrays kept are capped across the whole
// header, so 64⁴ nested values are read (skipped) in bounded memory.
func TestGGUFNestedArraysBounded(t *testing.T) {
	data := nestedGGUF(maxGGUFDepth)
	var g *GGUF
	var err error
	budget.Check(t, len(data), func() { g, err = ParseGGUF(bytes.NewReader(data)) })
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	var count func(v any)
	count = func(v any) {
		if l, ok := v.([]any); ok {
			kept += len(l)
			for _, x := range l {
				count(x)
			}
		}
	}
	count(g.Metadata["k"])
	if kept == 0 || kept > MaxGGUFKept {
		t.Errorf("kept %d array elements, want 1 … %d", kept, MaxGGUFKept)
	}
	// A long string array (a vocabulary) is skipped, not kept.
	var v bytes.Buffer
	v.WriteString("GGUF")
	le(&v, uint32(3), uint64(0), uint64(1), uint64(1), byte('t'), uint32(9), uint32(8), uint64(100000))
	for i := 0; i < 100000; i++ {
		binary.Write(&v, binary.LittleEndian, uint64(5))
		v.WriteString("token")
	}
	budget.Check(t, v.Len(), func() { g, err = ParseGGUF(bytes.NewReader(v.Bytes())) })
	if a, ok := g.Metadata["t"].(GGUFArray); err != nil || !ok || a.Len != 100000 || a.Type != "string" {
		t.Errorf("vocabulary: %v, %v", g.Metadata["t"], err)
	}
}

// longShapeShard is a safetensors file whose one tensor has a shape of n
// ones (one element).
func longShapeShard(n int) []byte {
	var h strings.Builder
	h.WriteString(`{"t": {"dtype": "U8", "shape": [`)
	for i := 0; i < n; i++ {
		if i > 0 {
			h.WriteByte(',')
		}
		h.WriteByte('1')
	}
	h.WriteString(`], "data_offsets": [0, 1]}}`)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(h.Len()))
	b.WriteString(h.String())
	b.WriteByte(0)
	return b.Bytes()
}

// TestSafetensorsHeadersBounded: a shape of millions of dimensions, too
// many shards, and headers that add up past the checkpoint's budget are
// errors before the reader holds them.
func TestSafetensorsHeadersBounded(t *testing.T) {
	oneGoroutineTable(t)
	data := longShapeShard(5_000_000)
	var err error
	budget.Check(t, len(data), func() { _, err = ReadSafetensors(bytes.NewReader(data)) })
	if err == nil || !strings.Contains(err.Error(), "more than 8 dimensions") {
		t.Errorf("long shape: %v", err)
	}
	if _, err := ReadSafetensors(bytes.NewReader(longShapeShard(5))); err != nil {
		t.Errorf("five dimensions: %v", err)
	}

	dir := t.TempDir()
	var idx strings.Builder
	idx.WriteString(`{"weight_map": {`)
	for i := 0; i <= MaxShards; i++ {
		if i > 0 {
			idx.WriteByte(',')
		}
		fmt.Fprintf(&idx, `"t%d": "s%d.safetensors"`, i, i)
	}
	idx.WriteString(`}}`)
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx.String()), 0o644)
	if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "more than the 1024 a checkpoint may have") {
		t.Errorf("too many shards: %v", err)
	}

	// Two shards of 70 MB headers: the second passes the 128 MiB budget.
	dir = t.TempDir()
	pad := strings.Repeat(" ", 70<<20)
	for i := 0; i < 2; i++ {
		h := fmt.Sprintf(`{"t%d": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}%s}`, i, pad)
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, uint64(len(h)))
		b.WriteString(h)
		b.WriteByte(0)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%d.safetensors", i)), b.Bytes(), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map": {"t0": "s0.safetensors", "t1": "s1.safetensors"}}`), 0o644)
	if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "all of a checkpoint's headers may take") {
		t.Errorf("headers past the budget: %v", err)
	}
}

// TestReadersRefuseFIFOs: every reader of a file a user names refuses a
// FIFO at once instead of blocking on it.
func TestReadersRefuseFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"ReadGGUF":       func() error { _, err := ReadGGUF(fifo); return err },
		"ReadPlan":       func() error { _, err := ReadPlan(fifo); return err },
		"ReadCheckpoint": func() error { _, err := ReadCheckpoint(fifo); return err },
		"OpenCheckpoint": func() error { _, err := OpenCheckpoint(dir); return err },
		"FromHFConfig": func() error {
			_, err := ParsePlan([]byte(`{"model": {"hf_config": "config.json"}, "train": {"seq_len": 8, "micro_batch": 1}}`), dir)
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- read() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s(fifo): %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s(fifo) blocked", name)
		}
	}
}

// TestCatalogValuesAreCopies: every value the catalogs hand out (GPUs,
// presets, the name lists) can be changed, sorted or cleared by its caller
// while other goroutines use the catalog (go test -race checks the
// sharing), and the catalog stays as it was.
func TestCatalogValuesAreCopies(t *testing.T) {
	mutate := func() {
		g, err := LookupGPU("H100 SXM")
		if err != nil {
			t.Error(err)
			return
		}
		sort.Strings(g.Aliases)
		for i := range g.Aliases {
			g.Aliases[i] = "changed"
		}
		if c, err := ParseCapacity("A100 80GB"); err == nil {
			slices.Reverse(c.Aliases)
			clear(c.Aliases)
		}
		p, err := LookupPreset("llava-1.5-7b")
		if err != nil {
			t.Error(err)
			return
		}
		p.Model.Layers, p.Model.Vision.Tower.Layers, p.Model.Vision.Tower.Image.Size = 1, 1, 1
		for _, names := range [][]string{GPUs(), Presets(), Families(), GGMLTypes()} {
			slices.Reverse(names)
			clear(names)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); mutate() }()
	}
	wg.Wait()
	if g, err := LookupGPU("H100 SXM"); err != nil || g.Name != "H100-80GB" || !slices.Contains(g.Aliases, "H100 SXM") {
		t.Errorf("H100 SXM after callers changed their copies: %+v, %v", g, err)
	}
	if p := MustPreset("llava-1.5-7b"); p.Layers != 32 || p.Vision.Tower.Layers != 24 || p.Vision.Tower.Image.Size != 336 {
		t.Errorf("llava after callers changed their copies: %d layers, tower %d layers at %d px", p.Layers, p.Vision.Tower.Layers, p.Vision.Tower.Image.Size)
	}
	if GPUs()[0] == "" || Presets()[0] == "" || Families()[0] == "" || GGMLTypes()[0] == "" {
		t.Error("a name list shares its storage with the catalog")
	}
}

// TestConfigTypesChecked: every config.json key the engine reads is checked
// for its JSON type and its values; a value of the wrong type is an error
// naming the key, never a silent default.
func TestConfigTypesChecked(t *testing.T) {
	llama := `"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100`
	for _, c := range []struct{ extra, want string }{
		{`"tie_word_embeddings": "true"`, `"tie_word_embeddings" must be true or false, got the string "true"`},
		{`"tie_word_embeddings": "yes"`, `"tie_word_embeddings" must be true or false`},
		{`"tie_word_embeddings": 1`, `"tie_word_embeddings" must be true or false, got the number 1`},
		{`"torch_dtype": "float128"`, `torch_dtype "float128": want float32, float16 or bfloat16`},
		{`"dtype": 16`, `"dtype" must be a string`},
		{`"architectures": "LlamaForCausalLM"`, `"architectures" must be a list`},
		{`"architectures": [7]`, `architectures[0] must be a class name`},
		{`"architectures": ["LlamaForQuestionAnswering"]`, `its QuestionAnswering head is not modelled`},
		{`"architectures": ["LlamaForTokenClassification"]`, `its TokenClassification head is not modelled`},
	} {
		_, err := FromHFConfig([]byte("{" + llama + ", " + c.extra + "}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.extra, err, c.want)
		}
	}
	for _, c := range []struct{ cfg, want string }{
		{`{"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4, "vocab_size": 100, "feed_forward_proj": 3}`, `"feed_forward_proj" must be a string`},
		{`{"model_type": "clip_vision_model", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32, "patch_size": 16, "hidden_act": ["gelu"]}`, `"hidden_act" must be a string`},
		{`{"model_type": "gemma2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "head_dim": 16, "attn_logit_softcapping": "50"}`, `"attn_logit_softcapping" must be a number`},
		{`{"model_type": "gpt_oss", "num_hidden_layers": 2, "layer_types": "full_attention"}`, `"layer_types" must be a list`},
		{`{"model_type": "gpt_oss", "num_hidden_layers": 2, "layer_types": [1, 2]}`, `layer_types[0] = the number 1`},
		{`{"model_type": "dinov2", "architectures": ["Dinov2ForImageClassification"], "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "image_size": 28, "patch_size": 14, "id2label": {"0": "a", "1": "b", "2": "c"}}`, `architectures names Dinov2ForImageClassification`},
	} {
		_, err := FromHFConfig([]byte(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestConfigArchitectureHeads: a task class's head is counted as
// transformers builds it, and a class the engine reads as another says so.
func TestConfigArchitectureHeads(t *testing.T) {
	llama := `"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100`
	lm, err := FromHFConfig([]byte("{" + llama + `, "architectures": ["LlamaForCausalLM"]}`))
	if err != nil || lm.Origin != nil {
		t.Fatalf("LlamaForCausalLM: %v, origin %+v", err, lm.Origin)
	}
	cls, err := FromHFConfig([]byte("{" + llama + `, "architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "neg", "1": "pos", "2": "neutral"}}`))
	if err != nil || cls.Head != "seq_cls_3" {
		t.Fatalf("LlamaForSequenceClassification: head %q, %v", cls.Head, err)
	}
	// The score layer (64 × 3, no bias) replaces the 100 × 64 lm_head.
	if got, want := cls.ParamCount(), lm.ParamCount()-100*64+64*3; got != want {
		t.Errorf("LlamaForSequenceClassification: %d parameters, want %d", got, want)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "hf", "bert-large-uncased.json"))
	if err != nil {
		t.Fatal(err)
	}
	bert, err := FromHFConfig(b)
	if err != nil || bert.Origin == nil || !strings.Contains(strings.Join(bert.Origin.Notes, " "), "BertForMaskedLM: modelled as the bare bert encoder") {
		t.Fatalf("BertForMaskedLM: %v, %+v", err, bert.Origin)
	}
	est, err := Training{Model: bert, SeqLen: 128, MicroBatch: 1}.Estimate()
	if err != nil || !strings.Contains(strings.Join(est.Notes, " "), "BertForMaskedLM") {
		t.Errorf("the estimate does not repeat the config's note: %v, %q", err, est.Notes)
	}
}
