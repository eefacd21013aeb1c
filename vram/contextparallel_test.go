package vram

import "testing"

// TestRingAttentionBuffers: under context parallelism the attention op
// holds, while it runs, every rank's keys and values (all-gathered once)
// beside the local cat, the merger's fp32 output and update, and one block
// output; its backward the keys and values gathered again, fp32 gradient
// accumulators for q, k and v, and the sent and received key/value
// gradients. Llama-3-8B at 8192 tokens on CP 4 as torchtitan runs it
// (repeat_kv before SDPA): each of q, k, v is 2048 tokens × 32 heads × 128
// in bf16, 16 MiB.
func TestRingAttentionBuffers(t *testing.T) {
	tr := Training{Model: MustPreset("llama-3-8b"), SeqLen: 8192, MicroBatch: 1, Precision: "bf16", Framework: "torchtitan",
		Parallel: Parallel{CP: 4, DP: 2, FSDP: "full_shard"}}
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	const qkv = 16 * MiB
	for _, op := range buildBlock(&r, 0).prog.ops {
		if op.name != "sdpa" {
			continue
		}
		for _, in := range op.ins[:3] {
			if in.bytes != qkv {
				t.Fatalf("sdpa input %s is %v, want %v", in.name, in.bytes, qkv)
			}
		}
		kv := 2 * qkv
		if want := 4*kv + kv + 2*2*qkv + qkv; op.workspace != want {
			t.Errorf("forward buffers %v, want %v", op.workspace, want)
		}
		if want := 4*kv + kv + 2*qkv + 3*2*kv; op.gradWorkspace != want {
			t.Errorf("backward buffers %v, want %v", op.gradWorkspace, want)
		}
		return
	}
	t.Fatal("no sdpa op in the block")
}
