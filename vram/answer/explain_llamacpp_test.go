package answer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/importer"
)

const lcMistral = `"model": {"family": "mistral", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 32000, "max_position": 32768}, ` +
	`"inference": {"batch": 1, "prompt_tokens": 512, "new_tokens": 16}`

func mibf(b vram.Bytes) string { return fmt.Sprintf("%.2f", float64(b)/float64(vram.MiB)) }
func mibi(b vram.Bytes) int64  { return int64(b / vram.MiB) }

// lcLog10573 writes the load ld as llama.cpp b10573 prints it at -lv 4,
// each line as its format string prints it (importer/enginelog_llamacpp.go
// cites them): the fit's lines, the load, llama-server's slots and
// llama-cli's memory breakdown at exit.
func lcLog10573(ld vram.LlamaCppLoad) string {
	f, d, h := ld.Fit, ld.Fit.Devices[0], ld.Fit.Host
	var b strings.Builder
	fmt.Fprintf(&b, "cmn  common_param: common_params_print_info: build 10573 (d775b8967) with GNU 13.3.0 for Linux x86_64\n")
	fmt.Fprintf(&b, "common_params_fit_impl: projected to use %d MiB of device memory vs. %d MiB of free device memory\n", mibi(f.Projected[0].Total()), mibi(d.Free))
	if f.Status == "fitted" {
		fmt.Fprintf(&b, "common_params_fit_impl: context size reduced from 32768 to %d -> need 1 MiB less memory in total\n", f.CtxSize)
	}
	fmt.Fprintf(&b, "common_fit_params: fitting params to free memory took 0.52 seconds\n")
	fmt.Fprintf(&b, "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - %d MiB free\n", mibi(d.Free))
	fmt.Fprintf(&b, "load_tensors: offloaded %d/%d layers to GPU\n", ld.Offloaded, ld.Offloadable)
	fmt.Fprintf(&b, "load_tensors: %12s model buffer size = %8s MiB\n", "CPU_Mapped", mibf(h.Model))
	fmt.Fprintf(&b, "load_tensors: %12s model buffer size = %8s MiB\n", "CUDA0", mibf(d.Model))
	fmt.Fprintf(&b, "llama_context: n_seq_max             = %d\nllama_context: n_ctx                 = %d\nllama_context: n_ctx_seq             = %d\n", ld.NSeqMax, ld.NCtx, ld.NCtxSeq)
	fmt.Fprintf(&b, "llama_kv_cache: %10s KV buffer size = %8s MiB\n", "CUDA0", mibf(d.Context-d.State))
	fmt.Fprintf(&b, "llama_kv_cache: size = %7s MiB (%6d cells, %3d layers, %2d/%d seqs), K (f16): %7s MiB, V (f16): %7s MiB\n", mibf(ld.KV), ld.Cells, 32, ld.NSeqMax, 1, mibf(ld.KV/2), mibf(ld.KV/2))
	fmt.Fprintf(&b, "sched_reserve: %10s compute buffer size = %8s MiB\n", "CUDA0", mibf(d.Compute))
	fmt.Fprintf(&b, "sched_reserve: %10s compute buffer size = %8s MiB\n", "CUDA_Host", "36.01")
	fmt.Fprintf(&b, "srv    load_model: initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = 'true'\n", ld.NSeqMax, ld.NCtxSeq)
	fmt.Fprintf(&b, "common_memory_breakdown_print: | memory breakdown [MiB] | total   free     self   model   context   compute    unaccounted |\n")
	fmt.Fprintf(&b, "common_memory_breakdown_print: |   - CUDA0 (RTX 4090)   | 24077 =  945 + (%d = %d +     %d +     %d) +        3945 |\n", mibi(d.Used), mibi(d.Model), mibi(d.Context), mibi(d.Compute))
	fmt.Fprintf(&b, "common_memory_breakdown_print: |   - Host               |                 %d = %d +       %d +      36                |\n", mibi(h.Total()), mibi(h.Model), mibi(h.Context))
	return b.String()
}

// TestExplainLlamaCppRoundTrip: a b10573 log written from the load the
// plan predicts (its compute buffer the log's, taken as the fit's)
// agrees figure by figure; with the KV buffer one MiB more, that figure
// alone disagrees, by one MiB, saying why. llama-fit-params' line and its
// --fit-print rows agree with the fit.
func TestExplainLlamaCppRoundTrip(t *testing.T) {
	p, err := vram.ParsePlanContent([]byte(`{` + lcMistral + `, "llama_cpp": {"device_free": ["16 GiB"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	lc := *p.LlamaCpp
	lc.ComputeBuffers = []vram.Bytes{560 * vram.MiB}
	ld, err := lc.Load(p.Model, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ld.Fit.Status != "fitted" {
		t.Fatalf("the plan's fit: %+v", ld.Fit)
	}
	log := lcLog10573(ld)
	for _, changed := range []bool{false, true} {
		text := log
		if changed {
			kv := "KV buffer size = " + fmt.Sprintf("%8s", mibf(ld.KV))
			text = strings.Replace(text, kv, "KV buffer size = "+fmt.Sprintf("%8s", mibf(ld.KV+vram.MiB)), 1)
		}
		l, err := importer.ReadEngineLog([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := ExplainLog(p, nil, l)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Report.LlamaCppFit == nil || ex.LlamaCppLoad == nil || ex.LlamaCppLoad.Fit.Release.Release != "b10573" {
			t.Fatalf("no fit or load in the explanation: %+v", ex)
		}
		compared := map[string]bool{}
		for _, c := range ex.Checks {
			compared[c.What] = true
			wantAgree := !changed || c.What != importer.LogKVBuffer
			if c.Agrees != wantAgree {
				t.Errorf("changed %v: %s %s agrees %v: %+v", changed, c.What, c.Device, c.Agrees, c)
			}
			if !wantAgree && (c.Diff != -float64(vram.MiB) || !strings.Contains(c.Why, "n_ctx")) {
				t.Errorf("the changed KV buffer: diff %v, why %q", c.Diff, c.Why)
			}
		}
		for _, what := range []string{importer.LogModelBuffer, importer.LogKVBuffer, importer.LogKVSize, importer.LogKVCells, importer.LogNCtx, importer.LogNCtxSeq,
			importer.LogNSeqMax, importer.LogOffloaded, importer.LogSlots, importer.LogCtxSlot, importer.LogFitProjected, importer.LogFitCtxReduced,
			importer.LogBreakdownModel, importer.LogBreakdownContext, importer.LogFreeAtStart} {
			if !compared[what] {
				t.Errorf("%s not compared: %+v", what, ex.Checks)
			}
		}
		if compared[importer.LogComputeBuffer] || compared[importer.LogBreakdownCompute] {
			t.Errorf("compute buffers compared though taken from the log: %+v", ex.Checks)
		}
		notes := strings.Join(ex.Notes, "\n")
		for _, want := range []string{"compute buffers are not modelled", "the log's, b10573 (d775b8967), is modelled", "host's compute buffer is not modelled"} {
			if !strings.Contains(notes, want) {
				t.Errorf("notes lack %q:\n%s", want, notes)
			}
		}
	}
	// llama-fit-params: its line and --fit-print rows (the settings as
	// given: the trained context).
	pr := ld.Fit.Projected[0]
	out := fmt.Sprintf("%s\nllama_fit_params: printing estimated memory in MiB to stdout (device, model, context, compute) ...\nCUDA0 %d %d %d \nHost %d %d %d \n",
		ld.Fit.Args, mibi(pr.Model), mibi(pr.Context), mibi(pr.Compute), mibi(ld.Fit.ProjectedHost.Model), mibi(ld.Fit.ProjectedHost.Context), 0)
	l, err := importer.ReadEngineLog([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	q := p
	qc := *p.LlamaCpp
	qc.ComputeBuffers = []vram.Bytes{560 * vram.MiB}
	q.LlamaCpp = &qc
	ex, err := ExplainLog(q, nil, l)
	if err != nil {
		t.Fatal(err)
	}
	if ex.FitArgs == nil || !ex.FitArgs.Agrees || ex.FitArgs.Log != ld.Fit.Args || !strings.HasPrefix(ld.Fit.Args, "-c ") {
		t.Errorf("fit-params line: %+v", ex.FitArgs)
	}
	n := 0
	for _, c := range ex.Checks {
		if !c.Agrees {
			t.Errorf("fit-params %s %s: %+v", c.What, c.Device, c)
		}
		n++
	}
	if n < 6 { // -c, -ngl, model and context of CUDA0 and Host, CUDA0's compute as the plan gives it
		t.Errorf("fit-params: %d checks: %+v", n, ex.Checks)
	}
}

// TestExplainLlamaCppValidationLines: the KV and compute lines the
// validation cases quote from a b4462 llama-server log (llamacpp_02,
// Qwen2.5-Coder-32B, q8_0 cache, -c 32768 -ngl 99 -ts 10,6 on two RTX
// 3090 Ti): modelled with b6173's rules (no fit), the KV buffers agree;
// the compute buffers, not modelled, are taken from the log.
func TestExplainLlamaCppValidationLines(t *testing.T) {
	const log = "build: 4462 (c05e8c99) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n" +
		"llama_kv_cache_init: kv_size = 32768, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 64\n" +
		"llama_kv_cache_init:      CUDA0 KV buffer size =  2788.00 MiB\n" +
		"llama_kv_cache_init:      CUDA1 KV buffer size =  1564.00 MiB\n" +
		"llama_new_context_with_model: KV self size  = 4352.00 MiB, K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB\n" +
		"llama_new_context_with_model:      CUDA0 compute buffer size =   233.00 MiB\n" +
		"llama_new_context_with_model:      CUDA1 compute buffer size =   237.51 MiB\n" +
		"llama_new_context_with_model:  CUDA_Host compute buffer size =   133.01 MiB\n"
	plan := `{"model": {"family": "qwen2", "layers": 64, "hidden": 5120, "heads": 40, "kv_heads": 8, "ffn": 27648, "vocab": 152064, "max_position": 32768}, ` +
		`"inference": {"batch": 1, "prompt_tokens": 512, "new_tokens": 16}, "gpu": "RTX-3090-Ti", "llama_cpp": {"ctx_size": 32768, "parallel": 1, "ubatch_size": 256, "flash_attn": true, ` +
		`"cache_type_k": "q8_0", "cache_type_v": "q8_0", "n_gpu_layers": 99, "tensor_split": [10, 6], "gpus": 2, "weight_type": "Q8_0"}}`
	p, err := vram.ParsePlanContent([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ExplainEngineLog([]byte(log), &p, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]LogCheck{}
	for _, c := range ex.Checks {
		got[c.What+" "+c.Device] = c
	}
	for _, k := range []string{"kv_buffer CUDA0", "kv_buffer CUDA1", "kv_size ", "kv_cells "} {
		if c, ok := got[k]; !ok || !c.Agrees {
			t.Errorf("%s: %+v (%v)", k, c, ok)
		}
	}
	if len(got) != 4 || ex.LlamaCppLoad.Fit.Release.Release != "b6173" || !strings.Contains(strings.Join(ex.Notes, "\n"), "older than every modelled release") {
		t.Errorf("checks %+v; release %s; notes %q", ex.Checks, ex.LlamaCppLoad.Fit.Release.Release, ex.Notes)
	}
	cuda1 := 237.51
	if cb := ex.LlamaCppLoad.Fit.Devices; cb[0].Compute != 233*vram.MiB || cb[1].Compute != vram.Bytes(cuda1*float64(vram.MiB)) {
		t.Errorf("compute buffers not taken from the log: %+v", cb)
	}
}

// TestExplainLlamaCppOldBuild: a b6173 log with -ngl unset in the plan
// (every layer, VRAM Lab's reading) beside a log that offloaded 10: the
// layers, and with them the weights and KV on each side, disagree, each
// saying why; the host's KV buffer is compared as the host's.
func TestExplainLlamaCppOldBuild(t *testing.T) {
	p, err := vram.ParsePlanContent([]byte(`{` + lcMistral + `, "gpu": "RTX-4090", "llama_cpp": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	log := "build: 6173 (4227c9be) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n" +
		"load_tensors: offloaded 10/33 layers to GPU\n" +
		"llama_context: n_seq_max     = 1\nllama_context: n_ctx         = 4096\nllama_context: n_ctx_per_seq = 4096\n" +
		"llama_kv_cache_unified:      CUDA0 KV buffer size =   160.00 MiB\n" +
		"llama_kv_cache_unified:        CPU KV buffer size =   352.00 MiB\n"
	ex, err := ExplainEngineLog([]byte(log), &p, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]LogCheck{}
	for _, c := range ex.Checks {
		got[c.What+" "+c.Device] = c
	}
	if c := got["layers_offloaded "]; c.Agrees || c.Predicted != 33 || !strings.Contains(c.Why, "b6325") {
		t.Errorf("layers: %+v", c)
	}
	if c := got["kv_buffer CPU"]; c.Agrees || c.Predicted != 0 || c.Log != 352*float64(vram.MiB) {
		t.Errorf("host KV: %+v", c)
	}
	for _, k := range []string{"n_ctx ", "n_ctx_seq ", "n_seq_max "} {
		if !got[k].Agrees {
			t.Errorf("%s: %+v", k, got[k])
		}
	}
	// A second GPU's line, which the one-GPU plan does not predict.
	two, err := ExplainEngineLog([]byte(log+"llama_kv_cache_unified:      CUDA1 KV buffer size =    16.00 MiB\n"), &p, "")
	if err != nil || len(two.Checks) != len(ex.Checks) || !strings.Contains(strings.Join(two.Notes, "\n"), "kv_buffer CUDA1 (line 8): the plan's load has 1 GPU(s)") {
		t.Errorf("a second GPU's line: %v, %d checks, notes %q", err, len(two.Checks), two.Notes)
	}
	// With -ngl 10, the plan agrees with the log.
	p.LlamaCpp.GPULayers = 10
	ex, err = ExplainEngineLog([]byte(log), &p, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ex.Checks {
		if !c.Agrees {
			t.Errorf("-ngl 10: %+v", c)
		}
	}
}

func TestExplainLlamaCppRefuses(t *testing.T) {
	log := []byte(llamaLoadLines)
	for _, c := range []struct{ plan, gpu, want string }{
		{"", "RTX-4090", "llama.cpp prints no command line"},
		{`{` + lcMistral + `, "gpu": "RTX-4090", "vllm": {}}`, "", `its "llama_cpp" settings`},
		{`{` + lcMistral + `, "llama_cpp": {}}`, "", "gpu: the GPU the log ran on"},
	} {
		var p *vram.Plan
		if c.plan != "" {
			x, err := vram.ParsePlanContent([]byte(c.plan))
			if err != nil {
				t.Fatal(err)
			}
			p = &x
		}
		if _, err := ExplainEngineLog(log, p, c.gpu); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40s: %v, want %q", c.plan, err, c.want)
		}
	}
}

const llamaLoadLines = "load_tensors: offloaded 33/33 layers to GPU\nllama_kv_cache:      CUDA0 KV buffer size =  1792.00 MiB\n"

func TestLlamaCppDeviceNames(t *testing.T) {
	for name, want := range map[string]int{"CUDA0": 0, "CUDA1": 1, "ROCm2": 2, "Vulkan0": 0, "MTL0": 0, "Metal": 0,
		"CPU": -1, "CPU_Mapped": -1, "CUDA_Host": -1, "CPU_REPACK": -1, "Host": -1, "": -1, "CUDA99999": -1} {
		if got := lcDevice(name); got != want {
			t.Errorf("%q: %d, want %d", name, got, want)
		}
	}
}
