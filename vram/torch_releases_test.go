package vram

import (
	"strings"
	"testing"
)

// TestGEMMWorkspaceByRelease: the workspace PyTorch's GEMM libraries keep,
// by part and release, as each row's source says.
func TestGEMMWorkspaceByRelease(t *testing.T) {
	const small = 8519680 // ":4096:2:16:8"
	thor := GPU{Name: "Thor", Arch: "Blackwell", ComputeCapability: 110}
	for _, c := range []struct {
		gpu   string
		g     *GPU
		torch string
		want  Bytes
	}{
		{"A100-80GB", nil, "", small},
		{"H100-80GB", nil, "2.1.0", 32 * MiB},
		{"H100-80GB", nil, "2.11.0", 32 * MiB},
		{"H100-80GB", nil, "", 32 * MiB},
		{"B200", nil, "2.11.0", small}, // Blackwell's 32 MiB is #175344's, in 2.12
		{"B200", nil, "2.12.0", 32 * MiB},
		{"B300", nil, "2.13.1", 32 * MiB},
		{"RTX-5090", nil, "2.10.0", small},
		{"RTX-5090", nil, "", 32 * MiB},
		{"DGX-Spark", nil, "2.15.0", 32 * MiB},
		{"", &thor, "2.13.0", small}, // major 11 from #189312, in 2.14
		{"", &thor, "2.14.0", 32 * MiB},
		{"MI300X", nil, "2.5.1", 0}, // torch set no ROCm workspace before 2.6
		{"MI300X", nil, "2.6.0", 128 * MiB},
		{"MI355X", nil, "2.9.0", 128*MiB + 76*MiB},
		{"MI300X", nil, "", 128*MiB + 76*MiB},
		{"Strix-Halo-128GB", nil, "", 32*MiB + 76*MiB},
		{"Apple-M-16GB", nil, "", 0},
		{"Gaudi-3", nil, "", 0},
	} {
		g := c.g
		if g == nil {
			gg := mustGPU(c.gpu)
			g = &gg
		}
		if got := gemmWorkspace(g, c.torch); got != c.want {
			t.Errorf("%s under torch %q: %d B, want %d B", g.Name, c.torch, int64(got), int64(c.want))
		}
	}
	if got := gemmWorkspace(nil, ""); got != small {
		t.Errorf("no GPU: %d B, want %d", int64(got), small)
	}
}

// TestTorchReleaseTable walks the table: each row is a release, newer than
// the one before, with its source, and resolves to itself; a release
// between rows takes the older row's rules and says so.
func TestTorchReleaseTable(t *testing.T) {
	var prev Version
	for i, r := range torchReleases {
		v, err := ParseVersion("torch", r.Version)
		if err != nil || r.Source == "" || i > 0 && !prev.Less(v) {
			t.Errorf("row %d %q: %v, source %q", i, r.Version, err, r.Source)
		}
		prev = v
		if _, m, err := torchReleaseOf(r.Version); err != nil || m.Release != r.Version || m.Note != "" {
			t.Errorf("%s resolves to %+v, %v", r.Version, m, err)
		}
	}
	_, m, err := torchReleaseOf("2.13.1+cu128")
	if err != nil || m.Release != "2.12.0" || !strings.Contains(m.Note, "2.14.0 is the next") {
		t.Errorf("2.13.1: %+v, %v", m, err)
	}
	if _, _, err := torchReleaseOf("latest"); err == nil || !strings.Contains(err.Error(), "versions.torch") {
		t.Errorf("a word for a release: %v", err)
	}
}

// TestPlanNamesItsTorch: a training plan's answer lists the torch release
// it modelled, the one its versions name, and its replay's workspace
// follows it.
func TestPlanNamesItsTorch(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3.2-1b"), SeqLen: 512, MicroBatch: 1, Precision: "bf16"}
	p := Plan{Training: &tr}
	if err := p.ApplyVersions(Versions{Torch: "2.11.0"}); err != nil {
		t.Fatal(err)
	}
	rel, err := p.Releases()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range rel {
		if m.Library == "torch" {
			found = m.Asked == "2.11.0" && m.Release == "2.9.0" && m.Note != ""
		}
	}
	if !found {
		t.Errorf("releases %v: want torch 2.11.0 modelled by the 2.9.0 row", rel)
	}
	b200 := mustGPU("B200")
	old, err := Budget{GPU: b200}.JudgePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Versions.Torch = ""
	cur, err := Budget{GPU: b200}.JudgePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	// The replay's peak moves by the workspaces' difference, to the
	// allocator's 512-byte rounding of what else is live then.
	if d, want := cur.Allocated-old.Allocated, Bytes(32*MiB-8519680); d < want-512 || d > want+512 {
		t.Errorf("B200 allocated under 2.15 − under 2.11: %d B, want %d B", int64(d), int64(want))
	}
	rp, err := tr.Replay(ReplayOptions{GPU: &b200, Torch: "2.11.0"})
	if err != nil || rp.Workspace != 8519680 {
		t.Errorf("B200 replay under 2.11: workspace %v, %v", rp.Workspace, err)
	}
}

// TestTGIReleaseTable: TGI's one row (its last release) resolves to itself,
// a plan serving with TGI lists it, and an older release asked for says it
// is modelled by 3.3.7's rules.
func TestTGIReleaseTable(t *testing.T) {
	if m, err := (TGI{}).release(); err != nil || m.Release != "3.3.7" || m.Source == "" {
		t.Errorf("current TGI: %+v, %v", m, err)
	}
	if m, err := (TGI{Version: "2.4.1"}).release(); err != nil || m.Release != "3.3.7" || !strings.Contains(m.Note, "older than every modelled release") {
		t.Errorf("TGI 2.4.1: %+v, %v", m, err)
	}
	p := Plan{Model: MustPreset("llama-3.1-8b"), Inference: &Inference{Batch: 1, PromptTokens: 1024}, TGI: &TGI{}}
	if err := p.ApplyVersions(Versions{TGI: "3.3.7"}); err != nil {
		t.Fatal(err)
	}
	rel, err := p.Releases()
	if err != nil || len(rel) != 1 || rel[0].Library != "tgi" || rel[0].Asked != "3.3.7" {
		t.Errorf("a TGI plan's releases: %+v, %v", rel, err)
	}
}
