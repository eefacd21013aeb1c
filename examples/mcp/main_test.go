package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vramlab/vramlab/vram"
)

var update = flag.Bool("update", false, "rewrite the tools' golden answers")

// connect is a client session with a fresh server, in memory.
func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	s, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

func planArg(t *testing.T, file string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "plans", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const vllmLog = "INFO vLLM server version 0.33.0, serving model meta-llama/Llama-3.1-8B-Instruct\n" +
	"INFO non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', 'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.85}\n" +
	"INFO Model loading took 14.99 GiB memory and 5.212345 seconds\n" +
	"INFO Available KV cache memory: 52.34 GiB\n" +
	"INFO GPU KV cache size: 428,768 tokens, Maximum concurrency for 8,192 tokens per request: 52.34x\n"

// TestToolsGolden: each tool's answer on fixed inputs is its golden file
// (go test ./examples/mcp -update rewrites them), and estimate's is the
// answer plan -json prints (the same package, vram/answer).
func TestToolsGolden(t *testing.T) {
	cs := connect(t)
	for _, c := range []struct {
		golden, tool string
		args         map[string]any
	}{
		{"estimate", "estimate", map[string]any{"plan": planArg(t, "llama3-8b-lora.json")}},
		{"fit", "fit", map[string]any{"plan": planArg(t, "llama3.1-70b-fsdp.json"), "gpu": "A100-40GB"}},
		{"import", "import", map[string]any{"config": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.85", "gpu": "H100-80GB"}},
		{"explain_log", "explain_log", map[string]any{"log": vllmLog, "gpu": "H100-80GB"}},
		{"presets", "presets", map[string]any{"contains": "llama-3.1"}},
		{"gpus", "gpus", map[string]any{}},
		{"search", "search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3.1-70b", "train": {"seq_len": 8192, "precision": "mixed_bf16", "framework": "torchtitan"}, "gpu": "H100-80GB", "search": {"gpus": 64, "global_batch": 64}}`), "top": 3}},
		{"search_serving", "search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3.1-70b", "inference": {"batch": 1, "prompt_tokens": 30000, "new_tokens": 2768}, "gpu": "H100-80GB", "vllm": {}}`), "gpus": 8, "top": 3}},
	} {
		r := call(t, cs, c.tool, c.args)
		if r.IsError {
			t.Errorf("%s: %v", c.tool, r.Content[0].(*mcp.TextContent).Text)
			continue
		}
		got, err := json.MarshalIndent(r.StructuredContent, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		file := filepath.Join("testdata", c.golden+".golden.json")
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the answer differs from %s (go test ./examples/mcp -update after a change on purpose)", c.tool, file)
		}
		if text := r.Content[0].(*mcp.TextContent).Text; !json.Valid([]byte(text)) {
			t.Errorf("%s: the text content is not the answer's JSON", c.tool)
		}
	}
}

// TestToolsRefuse: hostile and wrong inputs get the CLI's errors, naming
// the field, within the readers' budgets; nothing is read from a path or
// the hub.
func TestToolsRefuse(t *testing.T) {
	cs := connect(t)
	depth := 500 // within the protocol layer's 1000 (TestDeepMessage)
	deep := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"estimate", map[string]any{}, "arguments.plan: required"},
		{"estimate", map[string]any{"plan": "llama-3-8b"}, "arguments.plan: want a plan object"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b"}`), "extra": 1}, "arguments.extra: unknown field; known: gpu, plan"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": {"batch": 1}, "gpus": 8}`)}, "arguments.plan: gpus: unknown field"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": {"hf_config": "/etc/passwd"}, "inference": {"batch": 1}}`)}, "model.hf_config: a path"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": {"checkpoint": "/"}, "inference": {"batch": 1}}`)}, "model.checkpoint: a folder is a path"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "hf://meta-llama/Llama-3.1-8B", "inference": {"batch": 1}}`)}, "needs the network"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": ` + deep + `}`)}, "arguments.plan"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "name": "` + strings.Repeat("x", vram.MaxPlanFile) + `", "inference": {"batch": 1}}`)}, "more than a plan's"},
		{"estimate", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": {"batch": 1}}`), "gpu": "H1000"}, "arguments.gpu:"},
		{"fit", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": {"batch": 1}}`)}, "arguments.gpu: fit needs a GPU"},
		{"import", map[string]any{"config": "base_model: ./weights\nsequence_len: 2048\nmicro_batch_size: 1\n", "name": "a.yml"}, "a path or hub id is not read here"},
		{"import", map[string]any{"config": "x", "name": "../../etc/passwd"}, "arguments.name: a file name, not a path"},
		{"import", map[string]any{"config": "x", "gpus": 0}, "arguments.gpus"},
		{"import", map[string]any{"config": "x", "kind": "megatron-deepspeed"}, "want one of axolotl"},
		{"explain_log", map[string]any{"log": "hello"}, "none of the lines vLLM or SGLang print"},
		{"explain_log", map[string]any{"log": strings.Repeat("x\n", vram.MaxConfigFile)}, "none of the lines"},
		{"explain_log", map[string]any{"log": "Model loading took 1.00 GiB memory and 1 seconds\n"}, "arguments.plan: the log names no command line"},
		{"presets", map[string]any{"contains": 3}, "arguments.contains: want a string"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1}}`), "gpus": 8}, "arguments.gpu: search needs a GPU"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1}, "gpu": "H100-80GB"}`)}, "arguments.gpus: required"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "train": {"seq_len": 2048, "micro_batch": 1}, "gpu": "H100-80GB"}`), "gpus": 0}, "arguments.gpus: want a whole number"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": {"batch": 1}, "gpu": "H100-80GB"}`), "gpus": 8}, "search lays out a training plan"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "inference": {"batch": 1, "prompt_tokens": 4096}, "gpu": "H100-80GB", "vllm": {}}`)}, "arguments.gpus: required"},
		{"search", map[string]any{"plan": json.RawMessage(`{"model": "llama-3-8b", "train": {"seq_len": 2048}, "gpu": "H100-80GB", "search": {"gpus": 0}}`)}, "search: gpus must be"},
	} {
		r := call(t, cs, c.tool, c.args)
		text := r.Content[0].(*mcp.TextContent).Text
		if !r.IsError || !strings.Contains(text, c.want) {
			t.Errorf("%s %.120v: error %v %.300q, want %q", c.tool, c.args, r.IsError, text, c.want)
		}
	}
}

// TestToolsListed: the tools and their schemas as a client lists them.
func TestToolsListed(t *testing.T) {
	cs := connect(t)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s: no description or input schema", tool.Name)
		}
	}
	if got := strings.Join(names, " "); got != "estimate explain_log fit gpus import presets search" {
		t.Errorf("tools %s", got)
	}
}

// connectStdio is a client session with a fresh server over pipes, the
// server reading through cutDeep as main's does.
func connectStdio(t *testing.T) *mcp.ClientSession {
	t.Helper()
	s, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx := context.Background()
	st := &mcp.IOTransport{Reader: cutDeep(toServer, maxMessage), Writer: fromServer, MaxLineLength: maxMessage}
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient, MaxLineLength: maxMessage}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestDeepMessage: a message nested deeper than the SDK's 1000 levels
// gets the reader's error, as the CLI gives it for the same plan, and the
// session goes on.
func TestDeepMessage(t *testing.T) {
	cs := connectStdio(t)
	for _, depth := range []int{500, 2000, 9000} {
		deep := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
		plan := json.RawMessage(`{"model": "llama-3-8b", "inference": ` + deep + `}`)
		r := call(t, cs, "estimate", map[string]any{"plan": plan})
		if text := r.Content[0].(*mcp.TextContent).Text; !r.IsError || !strings.Contains(text, `inference.a: unknown field`) {
			t.Errorf("depth %d: %v %.200q, want the reader's error", depth, r.IsError, text)
		}
	}
	if r := call(t, cs, "presets", map[string]any{"contains": "llama-3.1-8b"}); r.IsError {
		t.Error("the session does not answer after deep messages")
	}
}

func TestShallow(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":[1,"]]{{",{"b":2}]}`, `{"a":[1,"]]{{",{"b":2}]}`},
		{`{"s":"\"{"}`, `{"s":"\"{"}`},
		{strings.Repeat("[", maxNesting+5) + strings.Repeat("]", maxNesting+5), strings.Repeat("[", maxNesting) + `"(nested too deep)"` + strings.Repeat("]", maxNesting)},
	} {
		got := string(shallow([]byte(c.in)))
		if got != c.want {
			t.Errorf("shallow(%.40q) = %.60q…, want %.60q…", c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("shallow(%.40q) is not JSON", c.in)
		}
	}
}

// FuzzShallow: whatever a message holds, cutting it never panics, and a
// valid JSON message stays valid JSON.
func FuzzShallow(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]]{{",{"b":2}]}`, `{"s":"\\"{"}`, strings.Repeat("[", 1000) + strings.Repeat("]", 1000), `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		out := shallow(msg)
		if json.Valid(msg) && !json.Valid(out) {
			t.Errorf("shallow(%q) = %q, not JSON", msg, out)
		}
	})
}
