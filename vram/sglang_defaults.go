package vram

import (
	"fmt"
	"math"
)

// SGLang's default --mem-fraction-static (0.5.3 sglang/srt/
// server_args.py; 0.5.23 srt/arg_groups/memory_hook.py, the differences in
// sglang_releases.go). Left unset, the fraction is worked out from the GPU:
// _handle_gpu_memory_settings (l.542-684) reads nvidia-smi's memory.total
// (the smallest of the GPUs, in MiB; utils/common.py l.1431-1462), picks
// chunked_prefill_size and cuda_graph_max_bs by that size and the TP
// degree, reserves 512 MiB, 1.5 MiB a token of the larger of the chunk
// and 2,048, 2 MiB a CUDA-graph batch and 1 GiB per 8 ranks (at least
// 10 GiB on a GPU over 60 GiB), and keeps the rest, rounded to three
// decimals. A vision-language model then gives up more by its tower's
// size (adjust_mem_fraction_for_vlm, l.3105-3142): 0.95 × a factor of 1
// less a tenth of how far the tower's layers × width² pass ViT-L/14's
// (24 × 1024²), kept within 0.8 … 1.05 — reading num_hidden_layers, so
// that a config naming its layers "depth" (the Qwen-VL towers) counts 24.
// SGLang turns multimodal off by default for Gemma 3 and Llama 4
// (configs/model_config.py l.121-134); --enable-multimodal turns it on.
// Without a GPU (KVPool), the fraction is SGLang's own fallback (0.88;
// 0.95 in 0.5.23). 0.5.23 also keeps 8 MiB back for each prefill CUDA
// graph it captures (1.5 GiB for an MLA model), and picks a 4,096-token
// chunk and 48 (160) decode graphs on a 20–35 GiB card.

// sglangGPUSizes are the chunked_prefill_size and cuda_graph_max_bs that
// SGLang picks for a GPU of gpuMiB at TP tp (l.566-623).
func sglangGPUSizes(gpuMiB float64, tp int, rel sglangRelease) (chunked, graphBS int) {
	big := func(small, large int) int {
		if tp < 4 {
			return small
		}
		return large
	}
	switch {
	case gpuMiB < 20*1024: // T4, RTX 4080
		return 2048, 8
	case gpuMiB < 35*1024: // A10, RTX 4090, RTX 5090
		return rel.smallChunk, big(rel.smallBS, rel.smallBSBig)
	case gpuMiB < 60*1024: // A100 40GB, L40
		return 4096, big(32, 160)
	case gpuMiB < 160*1024: // H100, A100 80GB, H20, H200
		return 8192, big(256, 512)
	}
	return 16384, 512 // B200, MI300
}

// sglangMaxPrefillTokens is max_prefill_tokens' default (l.191), which
// the reserve counts when chunked prefill is off.
const sglangMaxPrefillTokens = 16384

// sglangMMOff are the wrappers SGLang runs text-only unless
// --enable-multimodal (model_config.py l.123-127).
var sglangMMOff = map[string]bool{gemma3ModelType: true, llama4ModelType: true}

// multimodal reports whether SGLang runs m as a vision-language model.
func (s SGLang) multimodal(m Model) bool {
	return m.Vision != nil && (s.EnableMultimodal || !sglangMMOff[m.Vision.Family])
}

// memFraction is the --mem-fraction-static SGLang takes for m on a GPU of
// gpuMiB (0: unknown), and how it came to it.
func (s SGLang) memFraction(m Model, gpuMiB float64, rel sglangRelease) (float64, string) {
	frac, why := rel.fallback, "SGLang's fallback without a GPU"
	if gpuMiB > 0 {
		chunked, graphBS := sglangGPUSizes(gpuMiB, s.TP, rel)
		if s.ChunkedPrefillSize != 0 {
			chunked = s.ChunkedPrefillSize
		}
		if s.CUDAGraphMaxBS > 0 {
			graphBS = s.CUDAGraphMaxBS
		}
		prefill := chunked
		if chunked < 0 {
			prefill = sglangMaxPrefillTokens
			if s.MaxPrefillTokens > 0 {
				prefill = s.MaxPrefillTokens
			}
		}
		graphs := float64(graphBS) * 2
		if rel.prefillGraphs && !s.multimodal(m) && chunked > 0 {
			graphs += 8 * float64(prefillCaptureSizes(chunked))
			if m.KVLoRARank > 0 {
				graphs = float64(graphBS)*2 + 1.5*1024
			}
		}
		reserved := 512 + float64(max(prefill, 2048))*1.5 + graphs + float64(s.TP)/8*1024
		if gpuMiB > 60*1024 {
			reserved = max(reserved, 10*1024)
		}
		var draft float64
		if c := s.Speculative; c != nil {
			// 0.5.3 server_args.py:663-669: the draft model and its CUDA
			// graphs, after the floor.
			draft = rel.spec.reserveMiB[c.Algorithm]
		}
		reserved += draft
		frac = math.RoundToEven((gpuMiB-reserved)/gpuMiB*1000) / 1000
		why = fmt.Sprintf("SGLang %s's default for a %.0f MiB GPU at TP %d: %.0f MiB kept back for a %d-token prefill chunk and CUDA graphs of up to %d requests", rel.Version, gpuMiB, s.TP, reserved, prefill, graphBS)
		if graphs > float64(graphBS)*2 {
			why += fmt.Sprintf(" and %.0f MiB for the prefill graphs", graphs-float64(graphBS)*2)
		}
		if draft > 0 {
			why += fmt.Sprintf(", %.0f MiB of them for the %s draft", draft, s.Speculative.Algorithm)
		}
	}
	if s.multimodal(m) {
		tower := m.Vision.Tower.HFConfig()
		layers, width := 24.0, 1024.0 // getattr's defaults
		counted := " (the tower's config names no num_hidden_layers: SGLang counts 24)"
		if n, ok := tower["num_hidden_layers"].(int); ok {
			layers, counted = float64(n), ""
		}
		if n, ok := tower["hidden_size"].(int); ok {
			width = float64(n)
		}
		ratio := layers * width * width / (24 * 1024 * 1024)
		factor := 0.95 * min(1.05, max(0.8, 1-0.1*(ratio-1)))
		frac *= factor
		why += fmt.Sprintf(", × %.3f for the vision tower (%.0f layers × %.0f² against ViT-L/14's 24 × 1024²%s)", factor, layers, width, counted)
	}
	return frac, why
}
