package vram

import "testing"

// TestServingNCCL holds each engine's TP carve to the NCCL rule of
// serving_nccl.go: nothing at TP 1, nccl.go's bytes for the engine's TP
// communicator at TP 4 on an H100, and the free memory or the non-torch
// memory that sizes the cache lowered by them; vLLM 0.9.2, whose init
// snapshot precedes the parallel groups, counts its warmed-up
// PyNcclCommunicator and custom all-reduce IPC buffers too, connected at
// init (NCCL_CUMEM_ENABLE=0).
func TestServingNCCL(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	in := Inference{Model: MustPreset("qwen3-8b")}
	for _, tc := range []struct {
		engine, version string
		tp              int
		want            ncclComm // zero: none
		cuMem           bool
		nccl            string
		groups          bool // the parallel groups' communicators count too
	}{
		{engine: "sglang", version: "0.5.3", tp: 1},
		{engine: "sglang", version: "0.5.3", tp: 4, want: tpComm(4, ncclWarmUp, true), nccl: "2.27.3"},
		{engine: "sglang", version: "0.5.23", tp: 4, want: tpComm(4, ncclWarmUp, true), nccl: "2.30.7"},
		{engine: "vllm", version: "0.9.2", tp: 1},
		{engine: "vllm", version: "0.9.2", tp: 4, want: tpComm(4, ncclCollectives, false), nccl: "2.26.2", groups: true},
		{engine: "vllm", version: "0.11.0", tp: 1},
		{engine: "vllm", version: "0.11.0", tp: 4, want: tpComm(4, ncclCollectives, false), cuMem: true, nccl: "2.27.3"},
		{engine: "vllm", version: "0.14.1", tp: 4, want: tpComm(4, ncclCollectives, false), cuMem: true, nccl: "2.27.5"},
		{engine: "vllm", version: "0.33.0", tp: 4}, // the profile gathers through PyNccl
	} {
		var want Bytes
		if tc.want.ranks > 0 {
			rel, _, err := servingNCCLRelease(tc.nccl, tc.cuMem)
			if err != nil {
				t.Fatal(err)
			}
			want = ncclCommBytes(tc.want, g, rel)
			if tc.groups {
				want += ncclCommBytes(tpComm(tc.tp, ncclWarmUp, false), g, rel) + customAllReduceIPC(tc.tp, g)
			}
		}
		var got, car Bytes
		switch tc.engine {
		case "sglang":
			p, err := SGLang{Version: tc.version, TP: tc.tp, MemFractionStatic: 0.9}.Carve(in, g)
			if err != nil {
				t.Fatal(err)
			}
			got, car = p.NCCL, p.CustomAllReduce
			if p.Free != g.Total()-g.Context-got-car {
				t.Errorf("%s %s tp %d: free %v, want the GPU's less context, NCCL %v and custom all-reduce %v", tc.engine, tc.version, tc.tp, p.Free, got, car)
			}
			if wantCar := customAllReduceBytes(tc.tp, g); car != wantCar {
				t.Errorf("%s %s tp %d: custom all-reduce %v, want %v", tc.engine, tc.version, tc.tp, car, wantCar)
			}
		case "vllm":
			c, err := VLLM{Version: tc.version, TP: tc.tp}.Carve(in, g)
			if err != nil {
				t.Fatal(err)
			}
			got = c.NCCL
			if c.NonTorch != g.Context+got {
				t.Errorf("%s %s tp %d: non-torch %v, want the context %v and NCCL %v", tc.engine, tc.version, tc.tp, c.NonTorch, g.Context, got)
			}
		}
		if got != want {
			t.Errorf("%s %s tp %d: NCCL %v, want %v", tc.engine, tc.version, tc.tp, got, want)
		}
		if tc.tp == 1 && got+car != 0 {
			t.Errorf("%s %s tp 1: NCCL %v and custom all-reduce %v, want none", tc.engine, tc.version, got, car)
		}
	}
}

// TestNCCLWarmUp holds the warm-up communicator to the release's
// connection: lazy releases connect the ring alone, so the warm-up holds
// less than a communicator that has run collectives; without cuMem
// (NCCL_CUMEM_ENABLE=0) or before 2.22.3 every algorithm connects at
// init, warm-up or not.
func TestNCCLWarmUp(t *testing.T) {
	g, _ := LookupGPU("H100-80GB")
	for _, tc := range []struct {
		nccl  string
		cuMem bool
		eager bool
	}{
		{"2.27.3", true, false},
		{"2.30.7", true, false},
		{"2.27.3", false, true},
		{"2.21.5", true, true}, // before NCCL_RUNTIME_CONNECT
	} {
		rel, _, err := servingNCCLRelease(tc.nccl, tc.cuMem)
		if err != nil {
			t.Fatal(err)
		}
		warm := ncclCommBytes(tpComm(4, ncclWarmUp, false), g, rel)
		used := ncclCommBytes(tpComm(4, ncclCollectives, false), g, rel)
		if tc.eager != (warm == used) || warm > used || warm <= 0 {
			t.Errorf("NCCL %s cuMem %v: warm-up %v, after collectives %v; want them equal only when eager (%v)", tc.nccl, tc.cuMem, warm, used, tc.eager)
		}
	}
}
