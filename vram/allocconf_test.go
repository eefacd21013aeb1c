package vram

import (
	"strings"
	"testing"
)

func TestParseAllocConf(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    AllocatorConfig
		ignored string
		err     string
	}{
		{"", AllocatorConfig{}, "", ""},
		{"expandable_segments:True", AllocatorConfig{ExpandableSegments: true}, "", ""},
		{"expandable_segments:False, max_split_size_mb:512", AllocatorConfig{MaxSplitSize: 512 * MiB}, "", ""},
		{"garbage_collection_threshold:0.6,expandable_segments:True", AllocatorConfig{ExpandableSegments: true}, "garbage_collection_threshold", ""},
		{"expandable_segments:yes", AllocatorConfig{}, "", "expandable_segments must be True or False"},
		{"max_split_size_mb:8", AllocatorConfig{}, "", "max_split_size_mb must be a whole number of MiB above 20"},
		{"expandable_segments", AllocatorConfig{}, "", "want key:value pairs"},
		{"expandable_segment:True", AllocatorConfig{}, "", `unknown alloc_conf option "expandable_segment"`},
	} {
		got, ignored, err := parseAllocConf(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || strings.Join(ignored, ",") != c.ignored {
			t.Errorf("%q: %+v ignored %v err %v, want %+v ignored %q", c.in, got, ignored, err, c.want, c.ignored)
		}
	}
}

// TestAllocConfReplay: the replay runs with the plan's allocator settings,
// torchtitan's launcher's (expandable segments) when the plan names none,
// and ReplayOptions.Allocator over both.
func TestAllocConfReplay(t *testing.T) {
	plan := func(framework Framework, conf string) Training {
		tr := llamaPlan()
		tr.Framework, tr.AllocConf, tr.Checkpointing = framework, conf, "full"
		tr.MicroBatch, tr.Precision = 2, "mixed_bf16"
		return tr
	}
	replay := func(tr Training, opt ReplayOptions) Bytes {
		rp, err := tr.Replay(opt)
		if err != nil {
			t.Fatal(err)
		}
		return rp.PeakReserved
	}
	expandable := replay(plan("plain_pytorch", ""), ReplayOptions{Allocator: AllocatorConfig{ExpandableSegments: true}})
	def := replay(plan("plain_pytorch", ""), ReplayOptions{})
	if expandable == def {
		t.Fatalf("the plan reserves %v with and without expandable segments; pick one where they differ", def)
	}
	if replay(plan("torchtitan", ""), ReplayOptions{}) == replay(plan("torchtitan", "expandable_segments:False"), ReplayOptions{}) {
		t.Errorf("torchtitan reserves the same with its launcher's expandable segments as without")
	}
	for _, c := range []struct {
		name string
		tr   Training
		opt  ReplayOptions
		want Bytes
	}{
		{"plan's alloc_conf", plan("plain_pytorch", "expandable_segments:True"), ReplayOptions{}, expandable},
		{"torchtitan's launcher", plan("torchtitan", ""), ReplayOptions{}, replay(plan("torchtitan", "expandable_segments:True"), ReplayOptions{})},
		{"torchtitan told otherwise", plan("torchtitan", "expandable_segments:False"), ReplayOptions{}, replay(plan("torchtitan", ""), ReplayOptions{Allocator: AllocatorConfig{MaxSplitSize: 1 << 40}})},
		{"options over the plan", plan("plain_pytorch", "expandable_segments:True"), ReplayOptions{Allocator: AllocatorConfig{MaxSplitSize: 1 << 40}}, def},
	} {
		if got := replay(c.tr, c.opt); got != c.want {
			t.Errorf("%s: reserved %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCompileLoss: a compiled loss keeps a per-token logsumexp where the
// eager one keeps log_softmax's fp32 output (tokens × vocab), whatever the
// blocks do; compile_loss false is torchtitan's loss from 2024-12-18 to
// 2025-04-02, compile_loss true without compile its compile.components
// ["loss"].
func TestCompileLoss(t *testing.T) {
	head := func(compile bool, loss *bool) BlockActivations {
		tr := llamaPlan()
		tr.Framework, tr.Compile, tr.CompileLoss = "torchtitan", compile, loss
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		return buildEdges(&r).Head
	}
	no, yes := false, true
	m := MustPreset("llama-2-7b")
	tokens := int64(2048)
	want := FP32.Size(tokens*int64(m.Vocab)) - FP32.Size(tokens)
	if d := head(true, &no).Saved - head(true, nil).Saved; d != want {
		t.Errorf("compile with an eager loss saves %v more in the head, want log_softmax's %v less logsumexp", d, want)
	}
	if a, b := head(false, &yes).Saved, head(true, nil).Saved; a != b {
		t.Errorf("the loss compiled alone saves %v, with the model %v; want the same", a, b)
	}
	if a, b := head(false, nil).Saved, head(true, &no).Saved; a != b {
		t.Errorf("no compile saves %v in the head, compile with an eager loss %v; want the same", a, b)
	}
}
