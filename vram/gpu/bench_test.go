//go:build cgo && linux

package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/vramlab/vramlab/vram"
)

// BenchmarkSnapshotDGXH100: an NVML snapshot of 8 mock H100s (go-nvml's
// dgxh100 mock).
func BenchmarkSnapshotDGXH100(b *testing.B) {
	srv := dgxh100.New()
	wire(srv)
	for i := 0; i < b.N; i++ {
		if _, err := SnapshotFrom(srv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFitsOn: a fit check of a Llama-3-8B LoRA plan against a device
// (its allocator replay included), computed: the plan is new to the cache.
func BenchmarkFitsOn(b *testing.B) {
	s, _ := Fake("h100x1")
	t := loraPlan()
	for i := 0; i < b.N; i++ {
		vram.ForgetAnswers()
		if _, err := FitsOn(t, s.Devices[0], FitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFitsOnAgain: the same fit check asked for again in one program
// (a device list judging one plan on identical GPUs): the replay is the
// cache's answer.
func BenchmarkFitsOnAgain(b *testing.B) {
	s, _ := Fake("h100x1")
	t := loraPlan()
	for i := 0; i < b.N; i++ {
		if _, err := FitsOn(t, s.Devices[0], FitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// loraPlan is the fit checks' plan.
func loraPlan() vram.Training {
	return vram.Training{Model: vram.MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 4, Precision: "bf16", Checkpointing: "full",
		LoRA: &vram.LoRA{Rank: 16, Targets: []string{"q_proj", "v_proj"}}}
}
