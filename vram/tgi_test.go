package vram

import "testing"

// TestTGICarve: TGI's blocks are the wiggle room's share of what is free
// after the weights and the warmup, over layers × block × KV heads × head
// × 2 × dtype; a smaller memory fraction, a larger prefill warmup or more
// shards move them the way TGI's warmup does.
func TestTGICarve(t *testing.T) {
	g, _ := LookupGPU("A100-80GB")
	in := Inference{Model: MustPreset("llama-3.1-8b"), Weights: Quant{DType: BF16}}
	c, err := TGI{}.Carve(in, g)
	if err != nil {
		t.Fatal(err)
	}
	if c.BlockBytes != 32*16*8*128*2*2 || c.Blocks != int64(float64(c.Free)*0.90)/int64(c.BlockBytes) || c.MaxBatchTotalTokens != c.Blocks*16 {
		t.Fatalf("%+v", c)
	}
	if c.Usable != g.Total()-g.Context || c.Free != c.Usable-c.Weights-c.Activation {
		t.Errorf("budget %+v", c)
	}
	half, _ := TGI{CudaMemoryFraction: 0.5}.Carve(in, g)
	big, _ := TGI{MaxBatchPrefillTokens: 32768}.Carve(in, g)
	two, _ := TGI{NumShard: 2}.Carve(in, g)
	if half.Blocks >= c.Blocks || big.Blocks >= c.Blocks || two.Blocks <= c.Blocks {
		t.Errorf("fraction 0.5: %d, prefill 32k: %d, 2 shards: %d, default %d", half.Blocks, big.Blocks, two.Blocks, c.Blocks)
	}
	for name, tg := range map[string]TGI{"fraction": {CudaMemoryFraction: 2}, "wiggle": {WiggleRoom: 1}, "block": {BlockSize: -1}, "dtype": {KVCacheDType: INT4}} {
		if _, err := tg.Carve(in, g); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
