package importer

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram"
)

// TestSGLangServerArgsLog: an SGLang 0.5.3 and a 0.5.23 startup log, their
// server_args lines as those releases print them (testdata/enginelog/README.md),
// make the plan the launch_server command line they stand for makes: the
// launch's own flags (--tp 2 --kv-cache-dtype fp8_e5m2
// --max-running-requests 256 --context-length 8192, with --host and
// --enable-metrics, which do not touch memory) and the values SGLang
// resolved and printed (mem_fraction_static, chunked_prefill_size and,
// at 0.5.3, cuda_graph_max_bs).
func TestSGLangServerArgsLog(t *testing.T) {
	const launch = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 2 --kv-cache-dtype fp8_e5m2 " +
		"--max-running-requests 256 --context-length 8192 --host 0.0.0.0 --enable-metrics "
	for _, c := range []struct {
		file, defaults, command string
	}{
		{"sglang-0.5.3.log", "0.5.3", launch + "--mem-fraction-static 0.834 --chunked-prefill-size 8192 --cuda-graph-max-bs 256"},
		{"sglang-0.5.23.log", "0.5.23", launch + "--mem-fraction-static 0.828 --chunked-prefill-size 8192"},
	} {
		text, err := os.ReadFile("testdata/enginelog/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ReadEngineLog(text)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if l.Engine != "sglang" || l.ArgsDefaults != c.defaults || l.ArgsError != "" || len(l.Figures) != 5 {
			t.Errorf("%s: engine %q, defaults %q, error %q, %d figures", c.file, l.Engine, l.ArgsDefaults, l.ArgsError, len(l.Figures))
		}
		for _, f := range l.Figures {
			if f.Line == 1 { // 0.5.3's repr holds max_running_requests=256: a field, not the scheduler's figure
				t.Errorf("%s: %s read from the server_args line", c.file, f.What)
			}
		}
		opt := Options{Kind: KindSGLang, GPU: "H100-80GB", Sealed: true}
		fromLog, err := Import("log.sh", []byte(l.Args), opt)
		if err != nil {
			t.Fatalf("%s: %s: %v", c.file, l.Args, err)
		}
		fromCommand, err := Import("serve.sh", []byte(c.command), opt)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromLog.Plan, fromCommand.Plan) {
			t.Errorf("%s: the log's plan\n%+v\nis not the command line's\n%+v\n(args %s)", c.file, *fromLog.Plan.SGLang, *fromCommand.Plan.SGLang, l.Args)
		}
		if !reflect.DeepEqual(fromLog.Mapped, fromCommand.Mapped) || !reflect.DeepEqual(fromLog.NotModelled, fromCommand.NotModelled) || len(fromLog.Ignored) != 0 {
			t.Errorf("%s: mapped %q, not modelled %q, ignored %q; the command line's %q, %q", c.file,
				fromLog.Mapped, fromLog.NotModelled, fromLog.Ignored, fromCommand.Mapped, fromCommand.NotModelled)
		}
		if s := fromLog.Plan.SGLang; fromLog.Plan.ModelRef != "llama-3.1-8b" || s.TP != 2 || s.KVCacheDType != vram.FP8E5M2 || s.MaxRunningRequests != 256 {
			t.Errorf("%s: model %q, sglang %+v", c.file, fromLog.Plan.ModelRef, *s)
		}
	}
}

// TestSGLangServerArgsFields: which fields a line keeps, and how each
// becomes its flag.
func TestSGLangServerArgsFields(t *testing.T) {
	const m = "'model_path': 'meta-llama/Llama-3.1-8B-Instruct'"
	for _, c := range []struct{ line, want string }{
		// defaults, fields the importer knows nothing of, a resolved cuda_graph_bs: nothing
		{"{" + m + ", 'tp_size': 1, 'port': 8000, 'attention_backend': 'fa3', 'mamba_ssm_dtype': None, 'enable_multimodal': False}", ""},
		{"ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1, cuda_graph_bs=[1, 2, 4], mamba_ssm_dtype='float32', swa_full_tokens_ratio=0.8)", ""},
		// a number, a bool, a string, a list, None where the default is set
		{"{" + m + ", 'tp_size': 4, 'enable_multimodal': True, 'quantization': 'fp8', 'lora_paths': ['a', 'b'], 'kv_cache_dtype': None}",
			` --enable-multimodal --lora-paths '["a","b"]' --quantization fp8 --tp-size 4`},
		// the same value against each release's default
		{"ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', mamba_ssm_dtype='bfloat16', swa_full_tokens_ratio=0.5)",
			" --mamba-ssm-dtype bfloat16 --swa-full-tokens-ratio 0.5"},
		{"{" + m + ", 'mamba_ssm_dtype': 'float32', 'swa_full_tokens_ratio': 0.8, 'mamba_full_memory_ratio': 0.5}",
			" --mamba-full-memory-ratio 0.5 --mamba-ssm-dtype float32"},
		// a key twice: the last holds, as in Python
		{"{" + m + ", 'tp_size': 2, 'tp_size': 8}", " --tp-size 8"},
	} {
		args, _, err := sglangServerArgs(c.line)
		want := "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct" + c.want
		if err != nil || args != want {
			t.Errorf("%s:\n%s %v\nwant %s", c.line, args, err, want)
		}
	}
	// Every field given a default is one the importer's SGLang handling knows.
	for release, defaults := range sglangDefaults {
		for k := range defaults {
			if !sglangLogFlags()[normFlag(k)] {
				t.Errorf("%s: %s has a default but no flag the importer reads or explains", release, k)
			}
		}
	}
}

// TestSGLangServerArgsHostile: lines no SGLang prints are refused with a
// reason, or cut, never a panic or a hang; the figures are read still.
func TestSGLangServerArgsHostile(t *testing.T) {
	const m = "'model_path': 'meta-llama/Llama-3.1-8B-Instruct'"
	for _, c := range []struct{ name, line, want string }{
		{"deep nesting", "{" + m + ", 'x': " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}", "server_args: python"},
		{"a deep ServerArgs", "ServerArgs(model_path=" + strings.Repeat("f(", 3000) + strings.Repeat(")", 3000) + ")", "server_args: python"},
		{"a long chain of operators", "{" + m + ", 'tp_size': " + strings.Repeat("1+", 200000) + "1}", "server_args: python"},
		{"a huge model_path", "{'model_path': '" + strings.Repeat("m", 500000) + "'}", "model_path is 500000 bytes"},
		{"a huge value kept", "{" + m + ", 'json_model_override_args': '" + strings.Repeat("x", 5000) + "'}", "json_model_override_args: 5000 bytes"},
		{"an object's repr", "ServerArgs(model_path='m', custom_sigquit_handler=<function f at 0x7f>)", "server_args: python"},
		{"unclosed", "ServerArgs(model_path='m', tp_size=2", "server_args: python"},
		{"another class", "PortArgs(tokenizer_ipc_name='x')", "a PortArgs(…), not ServerArgs(…)"},
		{"positional", "ServerArgs('m', tp_size=2)", "positional arguments"},
		{"no model", "{'tp_size': 2}", "no model_path"},
		{"a model that is not a string", "{'model_path': ['m']}", "no model_path"},
		{"a number too large", "{" + m + ", 'tp_size': 99999999999999999999999}", "not a 64-bit integer"},
	} {
		start := time.Now()
		l, err := ReadEngineLog([]byte("[x] server_args=" + c.line + "\n[x TP0] Load weight end. avail mem=1.00 GB, mem usage=1.00 GB.\n"))
		if err != nil || len(l.Figures) != 1 || l.Args != "" || !strings.Contains(l.ArgsError, c.want) || !strings.HasPrefix(l.ArgsError, "line 1: ") {
			t.Errorf("%s: args %q, error %.200q, figures %v, %v; want an error with %q", c.name, l.Args, l.ArgsError, l.Figures, err, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: %v", c.name, d)
		}
	}
	// Cut, not refused: a key given 40,000 times, a huge string in a field
	// the importer does not read, a value pyconf does not evaluate.
	for _, line := range []string{
		"{" + strings.Repeat("'model_path': 'x', ", 40000) + m + ", 'tp_size': 2}",
		"{" + m + ", 'tp_size': 2, 'chat_template': '" + strings.Repeat("t", 900000) + "'}",
		"ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=2, watchdog_timeout=inf, stat_loggers=set())",
	} {
		args, _, err := sglangServerArgs(line)
		if err != nil || args != "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 2" {
			t.Errorf("%.60q: %q %v", line, args, err)
		}
	}
	// A value the importer then refuses is its error, naming the flag.
	args, _, err := sglangServerArgs("{" + m + ", 'mem_fraction_static': 1.5}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import("log.sh", []byte(args), Options{Kind: KindSGLang, Sealed: true}); err == nil || !strings.Contains(err.Error(), "--mem-fraction-static") {
		t.Errorf("mem_fraction_static 1.5: %v", err)
	}
	// Sealed: a path is not read.
	args, _, err = sglangServerArgs("{'model_path': '/models/llama'}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import("log.sh", []byte(args), Options{Kind: KindSGLang, Sealed: true}); err == nil {
		t.Errorf("a path's model imported sealed: %s", args)
	}
}

// FuzzSGLangServerArgs: whatever the line, reading it never panics, and
// a command line it makes imports (or is refused) without a panic.
func FuzzSGLangServerArgs(f *testing.F) {
	for _, file := range []string{"sglang-0.5.3.log", "sglang-0.5.23.log"} {
		text, err := os.ReadFile("testdata/enginelog/" + file)
		if err != nil {
			f.Fatal(err)
		}
		line, _, _ := strings.Cut(string(text), "\n")
		_, args, _ := strings.Cut(line, "server_args=")
		f.Add(args)
	}
	for _, s := range []string{"{'model_path': 'x', 'tp_size': [[[[", "ServerArgs(model_path='x', tp_size=2, lora_paths={'a': 'b'})",
		"{'model_path': 'llama-3.1-8b', 'mem_fraction_static': 0.9, 'kv_cache_dtype': 'fp8_e4m3', 'enable_multimodal': True}", "ServerArgs(**{'model_path': 'x'})"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > 1<<16 {
			return
		}
		args, _, err := sglangServerArgs(line)
		if err == nil {
			_, _ = Import("log.sh", []byte(args), Options{Kind: KindSGLang, GPU: "H100-80GB", Sealed: true})
		}
	})
}
