package vram

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// ttTinyMoE is the traced layer's shape (examples/measure/torchtitan_moe.py
// CASES): 8 experts, top-2, hidden 64, expert width 32, as a Qwen3-MoE (or,
// with a shared expert, a DeepSeek-V3) model torchtitan trains.
func ttTinyMoE(router string, shared int) Model {
	m := MustPreset("qwen3-30b-a3b")
	m.Name, m.Layers, m.Hidden, m.Heads, m.KVHeads, m.HeadDim, m.FFN, m.Vocab = "tiny", 2, 64, 4, 2, 16, 128, 256
	m.Experts, m.ExpertsPerToken, m.ExpertFFN, m.Router = 8, 2, 32, router
	if shared > 0 {
		m.SharedExperts, m.SharedExpertFFN = 1, shared
	}
	return m
}

func ttTinyPlan(m Model, p Parallel) Training {
	return Training{Model: m, SeqLen: 16, MicroBatch: 2, Precision: "mixed_bf16", Framework: FrameworkTorchtitan, Parallel: p}
}

// ttMoESaved is the bytes the MoE ops of block 0 save (the router, the
// dispatch, the experts, the combine, the shared experts), without the
// block's other tensors and without its input x (the norm's output), which
// the trace leaves out as the layer's argument.
func ttMoESaved(t *testing.T, tr Training) (Bytes, []ActTensor) {
	t.Helper()
	r, err := tr.resolve()
	if err != nil {
		t.Fatal(err)
	}
	blk := buildBlock(&r, 0)
	var sum Bytes
	var ts []ActTensor
	for _, a := range blk.Tensors {
		if !a.Saved {
			continue
		}
		for _, p := range []string{"router.", "moe.", "experts.", "shared_experts."} {
			if strings.HasPrefix(a.Op, p) && !strings.HasSuffix(a.Op, ".all_gather") {
				sum += a.Bytes
				ts = append(ts, a)
				break
			}
		}
	}
	return sum, ts
}

// TestTorchtitanMoESavedByHand: what torchtitan 0.3.0's MoE layer saves,
// summed by hand from the code for T = 32 tokens, K = 2, E = 8, D = 64,
// F = 32 (N = T·K = 64 routed rows), bf16 weights as FSDP2 gathers them:
//
//	router: x.float() 4·T·D = 8192, the fp32 weight copy 4·D·E = 2048,
//	  the scores 4·T·E = 1024, the top-k indices 8·T·K = 512; with
//	  route_norm the top-k scores 4·T·K = 256 and the denominator 4·T = 128
//	dispatch: argsort 8·N = 512, token indices 8·N = 512
//	experts: the routed input 2·N·D = 8192, w1's output, SiLU's, w3's and
//	  the product 4 × 2·N·F = 16384, the offsets 4·e
//	combine: the fp32 expert outputs 4·N·D = 16384, the sorted scores 4·N = 256
//	EP 2: e = 4 local experts and the permuted indices 8·R = 512 (R = N)
//	shared expert (width S = 32): its four T·S bf16 tensors 4·2·T·S = 8192;
//	  it saves x as well (w1 and w3), the layer's input, not counted here.
//	EP 2 under TP 2 (sequence parallel): the MoE keeps each rank's sequence
//	  shard, T = 16, N = 32: 4096 + 2048 + 512 + 256 + 128 + 64 + 256 + 256
//	  + 4096 + 8192 + 16 + 256 + 8192 + 128 = 28496.
func TestTorchtitanMoESavedByHand(t *testing.T) {
	const common = 8192 + 2048 + 1024 + 512 + 512 + 512 + 8192 + 16384 + 16384 + 256
	for name, tc := range map[string]struct {
		router string
		shared int
		ep, tp int
		want   Bytes
	}{
		"softmax norm ep1":        {"softmax_topk_norm", 0, 1, 1, common + 256 + 128 + 32},
		"softmax ep1":             {"softmax_topk", 0, 1, 1, common + 32},
		"sigmoid norm shared ep1": {"sigmoid_topk_norm", 32, 1, 1, common + 256 + 128 + 32 + 8192},
		"softmax norm ep2":        {"softmax_topk_norm", 0, 2, 1, common + 256 + 128 + 16 + 512},
		"sigmoid norm shared ep2": {"sigmoid_topk_norm", 32, 2, 1, common + 256 + 128 + 16 + 512 + 8192},
		"softmax norm ep2 tp2":    {"softmax_topk_norm", 0, 2, 2, 28496},
	} {
		t.Run(name, func(t *testing.T) {
			p := Parallel{DP: 2, FSDP: "full_shard"}
			if tc.ep > 1 {
				p.EP = tc.ep
			}
			if tc.tp > 1 {
				p.TP = tc.tp
			}
			got, ts := ttMoESaved(t, ttTinyPlan(ttTinyMoE(tc.router, tc.shared), p))
			if got != tc.want {
				for _, a := range ts {
					t.Logf("%-40s %-40s %6d %s", a.Op, a.Name, a.Bytes, a.DType)
				}
				t.Errorf("saved %d, want %d", got, tc.want)
			}
		})
	}
}

// TestTorchtitanMoETrace checks the engine against the CPU traces of
// torchtitan 0.3.0's MoE layer (vram/testdata/torchtitan_moe, written by
// examples/measure/torchtitan_moe.py): the bytes autograd saves, within
// 0.5 %. The trace's input is bf16; the shared expert's saved input is the
// layer's argument, which the trace does not count.
func TestTorchtitanMoETrace(t *testing.T) {
	routers := map[string]string{"softmax-norm": "softmax_topk_norm", "sigmoid-norm-shared": "sigmoid_topk_norm", "sigmoid": "topk_sigmoid", "sigmoid-groups": "sigmoid_topk_norm"}
	for _, file := range []string{"ep1.json", "ep2.json"} {
		raw, err := os.ReadFile("testdata/torchtitan_moe/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			EP    int `json:"ep"`
			Cases []struct {
				Config struct {
					Name   string `json:"name"`
					Groups int    `json:"groups"`
					Shared int    `json:"shared_hidden"`
				} `json:"config"`
				SavedBytes Bytes `json:"saved_bytes"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(raw, &tr); err != nil {
			t.Fatal(err)
		}
		for _, c := range tr.Cases {
			m := ttTinyMoE(routers[c.Config.Name], c.Config.Shared)
			m.ExpertGroups = c.Config.Groups
			p := Parallel{DP: 2, FSDP: "full_shard"}
			if tr.EP > 1 {
				p.EP = tr.EP
			}
			got, ts := ttMoESaved(t, ttTinyPlan(m, p))
			if d := float64(got) - float64(c.SavedBytes); d > 0.005*float64(c.SavedBytes) || -d > 0.005*float64(c.SavedBytes) {
				for _, a := range ts {
					t.Logf("%-40s %-40s %6d %s", a.Op, a.Name, a.Bytes, a.DType)
				}
				t.Errorf("%s ep %d: engine saves %d, the trace %d", c.Config.Name, max(1, tr.EP), got, c.SavedBytes)
			}
		}
	}
}

// TestTorchtitanExpertLayout: a rank's routed-expert weights under
// torchtitan, by hand for 8 experts of [32, 64] (w1, w3) and [64, 32] (w2),
// in the plan's weight dtype: per layer 3 · 8 · 2048 = 49152 elements.
// EP borrows its ranks from the FSDP ranks (efsdp = dp·tp/ep), so the
// share is the same at EP 1 and EP 2 on 4 ranks (2 experts whole, Shard(0)
// over efsdp 2); at EP 8 on 16 ranks efsdp = 2 and efsdp·ep = 16 > 8 experts,
// so each rank's one expert is split on dim 1: w1, w3 16 rows of 64, w2 32
// rows of 32, 3072 elements.
func TestTorchtitanExpertLayout(t *testing.T) {
	for _, tc := range []struct {
		p     Parallel
		elems int64
	}{
		{Parallel{DP: 4, FSDP: "full_shard"}, 49152 / 4},
		{Parallel{DP: 4, EP: 2, FSDP: "full_shard"}, 49152 / 4},
		{Parallel{DP: 2, TP: 2, EP: 2, FSDP: "full_shard"}, 49152 / 4},
		{Parallel{DP: 8, EP: 4, FSDP: "full_shard"}, 49152 / 8},
		{Parallel{DP: 16, EP: 8, FSDP: "full_shard"}, 3072},
	} {
		r, err := ttTinyPlan(ttTinyMoE("softmax_topk_norm", 0), tc.p).resolve()
		if err != nil {
			t.Fatal(err)
		}
		var got Bytes
		for _, x := range r.m.tensorSet().ts {
			if x.Layer == 0 && x.Expert >= 0 {
				got += r.tensorUnit(x, false).params
			}
		}
		if want := r.WeightsDType.Size(tc.elems); got != want {
			t.Errorf("%+v: expert weights %d bytes a rank, want %d", tc.p, got, want)
		}
	}
}

// TestTorchtitanMoESAC: torchtitan's op-level SAC (activation_checkpoint.py
// l.241-274) counts and saves every other mm but recomputes the router's
// gate whatever the count, never saves a grouped GEMM (aten._grouped_mm is
// in no save list), and must save topk's and the all-to-alls' outputs.
func TestTorchtitanMoESAC(t *testing.T) {
	r, err := ttTinyPlan(ttTinyMoE("sigmoid_topk_norm", 32), Parallel{DP: 2, EP: 2, FSDP: "full_shard"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	blk := buildBlock(&r, 0)
	want := map[string]bool{"router.topk": true, "moe.dispatch.all_to_all": true, "moe.combine.all_to_all": true}
	seen := 0
	for _, op := range blk.prog.ops {
		switch {
		case want[op.name]:
			seen++
			if !op.sacSave {
				t.Errorf("%s: SAC must save it", op.name)
			}
		case op.name == "router.gate" || strings.HasPrefix(op.name, "experts.w"):
			if op.mm || op.sacSave {
				t.Errorf("%s: SAC recomputes it and does not count it", op.name)
			}
		case op.sacSave:
			t.Errorf("%s: not in SAC's save list", op.name)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d ops SAC saves", seen, len(want))
	}
}

// TestTorchtitanMoEImbalance: expert_imbalance x moves the rows of the
// rank that holds the busiest expert under EP (N·(e−1+x)/e: 32 tokens, top-2,
// 4 local experts, x = 2: 64·5/4 = 80); at EP 1 every expert is local and
// the rows stay N = 64.
func TestTorchtitanMoEImbalance(t *testing.T) {
	for _, tc := range []struct {
		ep   int
		want int64
	}{{1, 64}, {2, 80}} {
		tr := ttTinyPlan(ttTinyMoE("softmax_topk_norm", 0), Parallel{DP: 2, EP: tc.ep, FSDP: "full_shard"})
		tr.ExpertImbalance = 2
		r, err := tr.resolve()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.ttMoERows(32); got != tc.want {
			t.Errorf("ep %d: %d rows, want %d", tc.ep, got, tc.want)
		}
	}
}
