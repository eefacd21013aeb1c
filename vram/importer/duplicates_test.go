package importer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// Tests that a value given twice, or given as 0, resolves as the
// framework resolves it, and the same way on every run (no map's order
// picks a winner).

// importedTwice imports data many times and fails unless every run gives
// the same plan and notes; it returns the first.
func importedTwice(t *testing.T, name, data string, opt Options) (Imported, error) {
	t.Helper()
	first, err := Import(name, []byte(data), opt)
	want := importSignature(first, err)
	for i := 0; i < 24; i++ {
		again, err := Import(name, []byte(data), opt)
		if got := importSignature(again, err); got != want {
			t.Fatalf("run %d differs:\n%s\nfirst:\n%s", i, got, want)
		}
	}
	return first, err
}

func importSignature(imp Imported, err error) string {
	b, _ := json.Marshal(imp)
	f, _ := json.Marshal(importFields(imp.Plan))
	return string(b) + string(f) + "\n" + errString(err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDuplicatesResolveAsTheFrameworkDoes: argparse keeps a flag's last
// value across its spellings and aliases; a key written with a dot is one
// key to TOML, OmegaConf and JSON, not the nested key; TOML refuses a key
// defined twice.
func TestDuplicatesResolveAsTheFrameworkDoes(t *testing.T) {
	toml := "\"training.seq_len\" = 131072\n[job]\ndescription = \"x\"\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n"
	torchtune := "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_rank: 8\n  lora_attn_modules: ['q_proj', 'v_proj']\n" +
		"tokenizer:\n  _component_: torchtune.models.llama3.llama3_tokenizer\n  max_seq_len: 2048\n\"tokenizer.max_seq_len\": 131072\n" +
		"batch_size: 2\ndataset:\n  _component_: torchtune.datasets.alpaca_dataset\n"
	for _, c := range []struct {
		name, file, data string
		opt              Options
		want             map[string]string
		note             string // a NotModelled line that must be there
		err              string
	}{
		{"vLLM spellings, last wins", "serve.sh", "vllm serve gpt2 --max_model_len 1024 --max-model-len 131072\n", Options{},
			map[string]string{"vllm.max_model_len": "131072"}, "", ""},
		{"vLLM spellings the other way", "serve.sh", "vllm serve gpt2 --max-model-len 131072 --max_model_len 1024\n", Options{},
			map[string]string{"vllm.max_model_len": "1024"}, "", ""},
		{"vLLM aliases, last wins", "serve.sh", "vllm serve gpt2 --tensor-parallel-size 8 -tp 1\n", Options{},
			map[string]string{"vllm.tp": "1"}, "", ""},
		{"vLLM aliases the other way", "serve.sh", "vllm serve gpt2 -tp 1 --tensor-parallel-size 2\n", Options{},
			map[string]string{"vllm.tp": "2"}, "", ""},
		{"SGLang aliases", "serve.sh", "python -m sglang.launch_server --model-path gpt2 --tp-size 4 --tp 2\n", Options{},
			map[string]string{"sglang.tp": "2"}, "", ""},
		{"TOML quoted dotted key", "job.toml", toml, Options{GPUs: 8},
			map[string]string{"seq": "8192"}, `"training.seq_len" = 131072: a key whose name holds a dot is one key to torchtitan, not the nested training.seq_len`, ""},
		{"OmegaConf literal dotted key", "lora.yaml", torchtune, Options{Model: "llama-3.1-8b"},
			map[string]string{"seq": "2048"}, `"tokenizer.max_seq_len" = 131072: a key whose name holds a dot is one key to torchtune`, ""},
		{"TOML key twice", "job.toml", "[training]\nseq_len = 8192\nseq_len = 131072\n", Options{}, nil, "", `key "seq_len" given twice`},
		{"YAML key twice", "a.yml", "base_model: gpt2\nsequence_len: 1024\nsequence_len: 4096\n", Options{}, nil, "", `key "sequence_len" given twice`},
		{"YAML flow key twice", "a.yml", "base_model: gpt2\nsequence_len: 1024\nlora: {r: 8, r: 16}\n", Options{}, nil, "", `key "r" given twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			imp, err := importedTwice(t, c.file, c.data, c.opt)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := importFields(imp.Plan)
			for k, want := range c.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			if c.note != "" && !strings.Contains(strings.Join(imp.NotModelled, "\n"), c.note) {
				t.Errorf("not modelled %q, want a line with %q", imp.NotModelled, c.note)
			}
		})
	}
}

// TestExplicitZeroIsNotTheDefault: 0 where the engine takes a fraction of
// the GPU is refused in the engine's words, never read as its default.
func TestExplicitZeroIsNotTheDefault(t *testing.T) {
	for _, c := range []struct{ name, file, data, want string }{
		{"vllm serve", "serve.sh", "vllm serve gpt2 --gpu-memory-utilization 0\n", "--gpu-memory-utilization 0: vLLM refuses it: its CacheConfig takes a fraction greater than 0"},
		{"SGLang", "serve.sh", "python -m sglang.launch_server --model-path gpt2 --mem-fraction-static 0\n", `--mem-fraction-static 0: SGLang keeps nothing for the weights and the KV pool and stops with "Not enough memory`},
		{"SGLang 0.0", "serve.sh", "python -m sglang.launch_server --model-path gpt2 --mem-fraction-static 0.0\n", "--mem-fraction-static 0:"},
		{"TRL", "grpo.sh", "accelerate launch trl/scripts/grpo.py --model_name_or_path gpt2 --use_vllm true --vllm_gpu_memory_utilization 0\n", "vllm_gpu_memory_utilization: 0 is refused by vLLM"},
		{"a plan's vllm", "plan.json", `{"model": "gpt2", "inference": {"batch": 1, "prompt_tokens": 8, "new_tokens": 8}, "vllm": {"gpu_memory_utilization": 0}}`, "vllm.gpu_memory_utilization: 0 is refused by vLLM"},
		{"a plan's sglang", "plan.json", `{"model": "gpt2", "inference": {"batch": 1, "prompt_tokens": 8, "new_tokens": 8}, "sglang": {"mem_fraction_static": 0.0}}`, "sglang.mem_fraction_static: 0 leaves SGLang nothing"},
		{"a plan's rollout", "plan.json", `{"model": "qwen2.5-0.5b", "post_training": {"algorithm": "grpo", "framework": "trl", "prompt_len": 8, "completion_len": 8, "rollout": {"engine": "vllm", "gpu_memory_utilization": 0}}}`, "post_training.rollout.gpu_memory_utilization: 0 leaves the engine no memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if strings.HasSuffix(c.file, ".json") {
				_, err = vram.ParsePlan([]byte(c.data), "")
			} else {
				_, err = Import(c.file, []byte(c.data), Options{})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestNamedFilesStayInTheConfigsFolder: the files a config names are read
// inside its folder; a path out of it (../, an absolute path, a link) is
// not read, nor quoted, unless the user allows it.
func TestNamedFilesStayInTheConfigsFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "configs")
	outside := filepath.Join(root, "secret.yaml")
	os.MkdirAll(dir, 0o755)
	secret := "max-model-len: 4096\nsecret_token: hunter2\n"
	os.WriteFile(outside, []byte(secret), 0o644)
	os.WriteFile(filepath.Join(dir, "inside.yaml"), []byte("max-model-len: 2048\n"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link.yaml"))
	ds := filepath.Join(root, "ds.json")
	os.WriteFile(ds, []byte(`{"zero_optimization": {"stage": 3}}`), 0o644)
	for _, c := range []struct {
		name, file, data string
		anywhere         bool
		want             map[string]string
		note             string
	}{
		{"--config beside", "serve.sh", "vllm serve gpt2 --config inside.yaml\n", false, map[string]string{"vllm.max_model_len": "2048"}, ""},
		{"--config ../", "serve.sh", "vllm serve gpt2 --config ../secret.yaml\n", false, map[string]string{"vllm.max_model_len": "0"}, "../secret.yaml is outside the config's folder"},
		{"--config absolute", "serve.sh", "vllm serve gpt2 --config " + outside + "\n", false, map[string]string{"vllm.max_model_len": "0"}, "is outside the config's folder"},
		{"--config /etc/passwd", "serve.sh", "vllm serve gpt2 --config /etc/passwd\n", false, nil, "/etc/passwd is outside the config's folder"},
		{"--config through a link", "serve.sh", "vllm serve gpt2 --config link.yaml\n", false, map[string]string{"vllm.max_model_len": "0"}, "link.yaml is outside the config's folder"},
		{"--config ../ allowed", "serve.sh", "vllm serve gpt2 --config ../secret.yaml\n", true, map[string]string{"vllm.max_model_len": "4096"}, ""},
		{"--deepspeed ../", "train.sh", "deepspeed train.py --model_name_or_path gpt2 --max_length 512 --deepspeed ../ds.json\n", false, map[string]string{"zero": "0"}, "../ds.json is outside the config's folder"},
		{"accelerate --config_file", "train.sh", "accelerate launch --config_file ../secret.yaml train.py --model_name_or_path gpt2 --max_length 512\n", false, nil, "../secret.yaml is outside the config's folder"},
		{"Hydra --config-path", "ppo.sh", "python3 -m verl.trainer.main_ppo --config-path=/etc --config-name=passwd algorithm.adv_estimator=grpo actor_rollout_ref.model.path=gpt2 actor_rollout_ref.rollout.name=vllm actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1\n", false, nil, "passwd: the YAML it names was not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			imp, err := Import(c.file, []byte(c.data), Options{Dir: dir, AnyPath: c.anywhere, Model: "gpt2"})
			all := errString(err) + "\n" + strings.Join(imp.NotModelled, "\n") + strings.Join(imp.Mapped, "\n")
			for _, leak := range []string{"hunter2", "root:"} {
				if strings.Contains(all, leak) && !c.anywhere {
					t.Fatalf("the import quotes a file it should not read: %s", all)
				}
			}
			if c.note != "" && !strings.Contains(all, c.note) {
				t.Errorf("%s\nwant a line with %q", all, c.note)
			}
			got := importFields(imp.Plan)
			for k, want := range c.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q (%v)", k, got[k], want, err)
				}
			}
		})
	}
}
