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
// --enable-multimodal from 0.4.5.post1 (0.5.3 model_config.py l.123-127;
// 0.4.9 l.103-114).
var sglangMMOff = map[string]bool{gemma3ModelType: true, llama4ModelType: true}

// multimodal reports whether SGLang's release rel runs m as a
// vision-language model.
func (s SGLang) multimodal(m Model, rel sglangRelease) bool {
	if m.Vision == nil {
		return false
	}
	return s.EnableMultimodal || !rel.mmOffByDefault || !sglangMMOff[m.Vision.Family]
}

// sglangFractionRule is how a release picks the default fraction.
type sglangFractionRule int

const (
	// fractionByGPU: 0.5.3 and later, by the GPU's size (above).
	fractionByGPU sglangFractionRule = iota
	// fractionByTP: 0.4.4, by the TP degree alone (server_args.py:
	// 203-214).
	fractionByTP
	// fractionByReserve049: 0.4.9, a reserve by the GPU's size and the
	// TP × PP degree (server_args.py:280-321).
	fractionByReserve049
)

// sglangVLMRule is how a release lowers the fraction for a multimodal
// model.
type sglangVLMRule int

const (
	// vlmByTower: 0.5.3 and later, by the tower's size, on the default
	// (adjust_mem_fraction_for_vlm, above).
	vlmByTower sglangVLMRule = iota
	// vlmRunner95: 0.4.4's ModelRunner multiplies whatever fraction it
	// is given by 0.95 (model_runner.py:242-243); applied in prepare.
	vlmRunner95
	// vlmDefault90: 0.4.9 multiplies its default by 0.90
	// (server_args.py:326-329).
	vlmDefault90
)

// memFraction is the --mem-fraction-static SGLang takes for m on a GPU of
// gpuMiB (0: unknown), and how it came to it.
func (s SGLang) memFraction(m Model, gpuMiB float64, rel sglangRelease) (float64, string) {
	frac, why := rel.fallback, "SGLang's fallback without a GPU"
	switch {
	case rel.fraction == fractionByTP:
		tp := max(1, s.TP)
		frac, why = sglangFractionByTP(tp), fmt.Sprintf("SGLang %s's default at TP %d (by the TP degree alone)", rel.Version, tp)
	case gpuMiB > 0 && rel.fraction == fractionByReserve049:
		frac, why = s.fractionByReserve049(gpuMiB, rel)
	case gpuMiB > 0:
		frac, why = s.fractionByGPU(m, gpuMiB, rel)
	}
	if !s.multimodal(m, rel) {
		return frac, why
	}
	switch rel.vlm {
	case vlmDefault90:
		return frac * 0.90, why + ", × 0.90 for a multimodal model"
	case vlmByTower:
		factor, counted := sglangTowerFactor(m)
		return frac * factor, why + fmt.Sprintf(", × %.3f for the vision tower (%s)", factor, counted)
	}
	return frac, why
}

// sglangFractionByTP is 0.4.4's default by the TP degree
// (server_args.py:203-214).
func sglangFractionByTP(tp int) float64 {
	switch {
	case tp >= 16:
		return 0.79
	case tp >= 8:
		return 0.81
	case tp >= 4:
		return 0.85
	case tp >= 2:
		return 0.87
	}
	return 0.88
}

// fractionByReserve049 is 0.4.9's default on a GPU of gpuMiB
// (server_args.py:280-321): the GPU less a reserve for activations and
// CUDA graphs by its size and the parallel degree (TP × PP, here TP),
// 2 GiB more with speculative decoding, rounded to three decimals.
func (s SGLang) fractionByReserve049(gpuMiB float64, rel sglangRelease) (float64, string) {
	ps := float64(max(1, s.TP))
	var reserved float64 // GiB
	switch {
	case gpuMiB < 35*1024: // T4, RTX 4080; A10, L40, RTX 4090, RTX 5090
		reserved = 2.8 + ps/10
	case gpuMiB < 90*1024: // H100, A100
		reserved = 9.5 + ps/2
	case gpuMiB < 160*1024: // H20, H200
		reserved = 12 + ps/2
	default: // B200, MI300
		reserved = 32
	}
	if s.Speculative != nil {
		reserved += 2
	}
	frac := math.RoundToEven((gpuMiB-reserved*1024)/gpuMiB*1000) / 1000
	return frac, fmt.Sprintf("SGLang %s's default for a %.0f MiB GPU at TP %d: %.0f MiB kept back for activations and CUDA graphs", rel.Version, gpuMiB, max(1, s.TP), reserved*1024)
}

// fractionByGPU is the default of 0.5.3 and later on a GPU of gpuMiB
// (above).
func (s SGLang) fractionByGPU(m Model, gpuMiB float64, rel sglangRelease) (float64, string) {
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
	if rel.prefillGraphs && !s.multimodal(m, rel) && chunked > 0 {
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
	frac := math.RoundToEven((gpuMiB-reserved)/gpuMiB*1000) / 1000
	why := fmt.Sprintf("SGLang %s's default for a %.0f MiB GPU at TP %d: %.0f MiB kept back for a %d-token prefill chunk and CUDA graphs of up to %d requests", rel.Version, gpuMiB, s.TP, reserved, prefill, graphBS)
	if graphs > float64(graphBS)*2 {
		why += fmt.Sprintf(" and %.0f MiB for the prefill graphs", graphs-float64(graphBS)*2)
	}
	if draft > 0 {
		why += fmt.Sprintf(", %.0f MiB of them for the %s draft", draft, s.Speculative.Algorithm)
	}
	return frac, why
}

// sglangTowerFactor is adjust_mem_fraction_for_vlm's factor for m's tower
// (0.5.3 server_args.py:3105-3142), and how its layers were counted.
func sglangTowerFactor(m Model) (float64, string) {
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
	return factor, fmt.Sprintf("%.0f layers × %.0f² against ViT-L/14's 24 × 1024²%s", layers, width, counted)
}
