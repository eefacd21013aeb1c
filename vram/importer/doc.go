// Package importer makes plans from what users already have: a trainer's
// config (axolotl, LLaMA-Factory, torchtune, torchtitan, TrainingArguments,
// DeepSpeed, accelerate, TRL, verl, Megatron) or a server's command line (vllm serve, SGLang's
// launch_server, llama-server), recognised by content. Each field is
// mapped as that project's own config classes read it, with their
// defaults (cited in each kind's file); a field that matters for memory
// and is not modelled is named, a field that does not matter is listed
// once as ignored, and what the config leaves to the launch (the GPU, the
// world size, a model the catalog does not know) comes from Options.
//
//	imp, err := importer.Read("qlora.yml", importer.Options{GPU: "RTX-4090"})
//	est, err := imp.Plan.Training.Estimate()
//	fmt.Println(imp.NotModelled)
//
// ReadEngineLog reads a vLLM or SGLang startup log: the memory figures it
// printed, and its args line (vLLM's non-default args, SGLang's
// server_args) as the command line it stands for, which imports as any
// command line does, so that a log alone names its plan. It reads a
// llama.cpp log (and llama-fit-params' output) too: its buffers by device,
// context, layers, breakdown and fit, and its build; llama.cpp prints no
// command line, so its plan is given.
//
// Open reads whatever names a run — a plan file or any config above — and
// Keys says a piece of vram's advice in the kind's own keys. The readers
// of the text formats live in vram/internal (yaml, toml, pyconf,
// strictjson); every reader keeps to fileio's budget.
package importer
