package vram

import (
	"strings"
	"testing"
)

// TestLookupGPUByEveryName: every catalog name and alias, written as a
// user might (upper case, spaces for dashes), finds the first catalog GPU
// that declares it, as a scan of the catalog in order does.
func TestLookupGPUByEveryName(t *testing.T) {
	scan := func(name string) string {
		n := normGPU(name)
		for _, g := range gpus {
			if normGPU(g.Name) == n {
				return g.Name
			}
			for _, a := range g.Aliases {
				if normGPU(a) == n {
					return g.Name
				}
			}
		}
		return ""
	}
	for _, g := range gpus {
		for _, name := range append([]string{g.Name}, g.Aliases...) {
			for _, typed := range []string{name, upperSpaced(name)} {
				got, err := LookupGPU(typed)
				if want := scan(typed); err != nil || got.Name != want {
					t.Errorf("LookupGPU(%q) = %q, %v; the catalog's first match is %q", typed, got.Name, err, want)
				}
			}
		}
	}
	if _, err := LookupGPU("no such gpu"); err == nil {
		t.Error("an unknown name is found")
	}
}

// upperSpaced is name in upper case with its dashes as spaces.
func upperSpaced(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = ' '
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestUnknownGPUSuggestsOnlyItsKind: a GPU the catalog lacks is not taken
// for another generation (B400 is no B300, MI450X no MI355X); a misspelt one
// is found; each refusal says how to give a card by its capacity.
func TestUnknownGPUSuggestsOnlyItsKind(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"B400", ""}, {"MI450X", ""}, {"H100-PCI", `did you mean "H100-PCIe"?`}, {"RTX-409", ""}, {"A100-80G", `did you mean "A100-80GB"?`},
	} {
		_, err := LookupGPU(c.name)
		if err == nil || !strings.Contains(err.Error(), `given by its capacity, such as "80 GiB"`) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.Contains(err.Error(), "did you mean"); got != (c.want != "") || c.want != "" && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	_, err := FromHFConfig([]byte(`{"model_type": "gemma5"}`))
	if err == nil || !strings.Contains(err.Error(), "the nearest it models: gemma, gemma2, gemma3, gemma3_text, gemma3n, gemma3n_audio, gemma3n_text, gemma3n_vision, gemma4") || !strings.Contains(err.Error(), "vram/family_gemma5.go") {
		t.Errorf("gemma5: %v", err)
	}
}

// printed is x of unit, as a source prints it ("10922.67 MiB").
func printed(x float64, unit Bytes) Bytes { return Bytes(x * float64(unit)) }

// within1pct: got is want within 1 %.
func within1pct(got, want Bytes) bool {
	d := float64(got - want)
	return d <= 0.01*float64(want) && -d <= 0.01*float64(want)
}

// TestGPUCatalog2026: each part added from the 2026 research reports the
// total its source published (nvidia-smi's, and CUDA's where one was
// measured), within 1 %, and a plan names it by any of its aliases.
func TestGPUCatalog2026(t *testing.T) {
	for _, c := range []struct {
		name    string
		aliases []string
		nvml    Bytes // the tool's total as the source prints it
		cuda    Bytes // CUDA's total, zero where none was measured
	}{
		{"H200-NVL", []string{"NVIDIA H200 NVL", "H200 NVL"}, 143771 * MiB, 150109880320},
		{"GH200", []string{"NVIDIA GH200 480GB", "GH200 96GB"}, 97871 * MiB, 0},
		{"GH200-144GB", []string{"NVIDIA GH200 144G HBM3e", "GH200 144GB"}, 146831 * MiB, 0},
		{"RTX-5090-Laptop", []string{"NVIDIA GeForce RTX 5090 Laptop GPU", "RTX 5090 Laptop"}, 24463 * MiB, 0},
		{"RTX-4090-Laptop", []string{"NVIDIA GeForce RTX 4090 Laptop GPU", "RTX 4090 Laptop"}, 16376 * MiB, 0},
		{"RTX-5080", []string{"NVIDIA GeForce RTX 5080", "RTX 5080"}, 16303 * MiB, 15880 * MiB},
		{"RTX-5070-Ti", []string{"NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti"}, 16303 * MiB, 15842 * MiB},
		{"RTX-PRO-6000-Max-Q", []string{"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000 Max-Q"}, 97887 * MiB, 0},
	} {
		for _, a := range append([]string{c.name}, c.aliases...) {
			g, err := ParseCapacity(a)
			if err != nil || g.Name != c.name {
				t.Errorf("a plan's gpu %q is %q, %v; want %s", a, g.Name, err, c.name)
			}
		}
		g := mustGPU(c.name)
		if !within1pct(g.Memory, c.nvml) {
			t.Errorf("%s: memory %v, its source's %v", c.name, g.Memory, c.nvml)
		}
		want := c.cuda
		if want == 0 {
			want = c.nvml // no CUDA total measured: the tool's stands
		}
		if !within1pct(g.Total(), want) || (c.cuda == 0) != (g.CUDATotal == 0) {
			t.Errorf("%s: total %v (CUDA %v), its source's %v", c.name, g.Total(), g.CUDATotal, want)
		}
		if g.Unified || g.Source == "" || g.ComputeCapability == 0 {
			t.Errorf("%s: unified %v, compute capability %d, source %q", c.name, g.Unified, g.ComputeCapability, g.Source)
		}
	}
}

// TestGPUUnifiedCatalog2026: an Apple silicon Mac plans against Metal's
// recommendedMaxWorkingSetSize as its source measured it (its Memory is
// the RAM, the reserve the rest), Strix Halo against the total ROCm and
// PyTorch report; both within 1 %, both unified (the plan's host memory
// counted in the need, as on DGX Spark), neither with CUDA, and a plan
// names each by its aliases.
func TestGPUUnifiedCatalog2026(t *testing.T) {
	p := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "mixed_bf16", Checkpointing: CheckpointFull,
		Parallel: Parallel{ZeRO: 2, CPUOffload: "optimizer"}}
	for _, c := range []struct {
		name    string
		aliases []string
		ram     Bytes // the machine's memory as the source states it
		limit   Bytes // what the plan may use, as the source printed it
		metal   bool
	}{
		{"Apple-M-16GB", []string{"Apple M1 16GB", "Mac 16GB"}, 16 * GiB, printed(10922.67, MiB), true},
		{"Apple-M-24GB", []string{"Apple M4 Pro 24GB", "Mac 24GB"}, 25769803776, 19069665280, true},
		{"Apple-M-32GB", []string{"Apple M2 Max 32GB", "Mac 32GB"}, 32 * GiB, printed(21845.34, MiB), true},
		{"Apple-M-36GB", []string{"Apple M3 Max 36GB", "Mac 36GB"}, 36 * GiB, 30150.67e6, true},
		{"Apple-M-64GB", []string{"Apple M1 Max 64GB", "Mac 64GB"}, 64 * GiB, 51539.61e6, true},
		{"Apple-M-96GB", []string{"Apple M2 Max 96GB", "Mac 96GB"}, 96 * GiB, 73728 * MiB, true},
		{"Apple-M-128GB", []string{"Apple M4 Max 128GB", "Apple M5 Max 128GB", "Mac 128GB"}, 137438953472, 115448725504, true},
		{"Apple-M-256GB", []string{"Apple M3 Ultra 256GB", "Mac 256GB"}, 274877906944, 239143780352, true},
		{"Strix-Halo-128GB", []string{"AMD Ryzen AI Max+ 395 128GB", "Radeon 8060S 128GB"}, printed(62.47, GiB), printed(62.47, GiB), false},
	} {
		for _, a := range append([]string{c.name}, c.aliases...) {
			g, err := ParseCapacity(a)
			if err != nil || g.Name != c.name {
				t.Errorf("a plan's gpu %q is %q, %v; want %s", a, g.Name, err, c.name)
			}
		}
		g := mustGPU(c.name)
		if !within1pct(g.Total(), c.ram) || !g.Unified || g.ComputeCapability != 0 || g.Context != 0 || (g.Arch == "Metal") != c.metal {
			t.Errorf("%s: total %v (its source's %v), unified %v, compute capability %d, context %v, arch %s", c.name, g.Total(), c.ram, g.Unified, g.ComputeCapability, g.Context, g.Arch)
		}
		if l := (Budget{GPU: g}).Limit(); !within1pct(l, c.limit) {
			t.Errorf("%s: limit %v, its source's %v", c.name, l, c.limit)
		}
		b := Budget{GPU: g, Headroom: DefaultHeadroom}
		v, err := b.Judge(p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !within1pct(v.Limit, Bytes(float64(c.limit)*(1-DefaultHeadroom))) || v.Host == 0 || v.Need != v.DeviceUsed+v.Host ||
			!strings.Contains(v.Why, "unified, shared with the CPU") || strings.Contains(v.Why, "operating system") != c.metal {
			t.Errorf("%s: limit %v, host %v, need %v, device used %v: %s", c.name, v.Limit, v.Host, v.Need, v.DeviceUsed, v.Why)
		}
	}
}

// TestServingEnginesRefuseMetal: vLLM, SGLang and TGI are not judged on an
// Apple silicon Mac as if it were a CUDA GPU; llama.cpp is.
func TestServingEnginesRefuseMetal(t *testing.T) {
	mac := mustGPU("Apple-M-16GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Batch: 1, PromptTokens: 1024, NewTokens: 128}
	for name, carve := range map[string]func() error{
		"vLLM":   func() error { _, err := VLLM{}.Carve(in, mac); return err },
		"SGLang": func() error { _, err := SGLang{}.Carve(in, mac); return err },
		"TGI":    func() error { _, err := TGI{}.Carve(in, mac); return err },
	} {
		err := carve()
		if err == nil || !strings.Contains(err.Error(), "not on Apple silicon (Metal)") || !strings.Contains(err.Error(), name) {
			t.Errorf("%s on %s: %v, want a refusal naming Metal", name, mac.Name, err)
		}
	}
	if _, err := (VLLM{}).Carve(in, mustGPU("MI300X")); err != nil {
		t.Errorf("vLLM on ROCm: %v", err)
	}
}
