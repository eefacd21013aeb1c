package importer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vramlab/vramlab/vram"
)

// vLLM's startup plan: with VLLM_ENABLE_STARTUP_PLAN=1 (0.33), each worker
// saves what its memory profile found under
// {VLLM_CACHE_ROOT}/startup_plan/startup_plan_<fingerprint>.json
// (v1/worker/startup_plan.py:161-191):
//
//	{"schema": 1, "fingerprint": "…", "kv_cache_memory_bytes": N, "free_memory_baseline": M}
//
// N is the suggestion to fit the requested memory (gpu_worker.py:1037-1068,
// kv_cache_memory_bytes_to_requested_limit, which counts the CUDA graphs
// twice: vllm#57936) and M the free memory at the worker's start (its init
// snapshot). A later boot whose fingerprint matches applies N as
// --kv-cache-memory, skipping the profile, when the device has at least M
// free (startup_plan.py:111-133).

// startupPlanSchema is the plan format read (startup_plan.py:39).
const startupPlanSchema = 1

type startupPlan struct {
	Schema      *int   `json:"schema"`
	Fingerprint string `json:"fingerprint"`
	KVBytes     *int64 `json:"kv_cache_memory_bytes"`
	FreeBytes   *int64 `json:"free_memory_baseline"`
}

// isStartupPlan reports whether data is a JSON object (a startup plan to
// read, not a log).
func isStartupPlan(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(data), []byte("{"))
}

// readStartupPlan reads a vLLM startup plan as a log of two figures.
func readStartupPlan(data []byte) (EngineLog, error) {
	var sp startupPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return EngineLog{}, fmt.Errorf("startup plan: %v (a vLLM startup_plan_<fingerprint>.json has schema, fingerprint, kv_cache_memory_bytes and free_memory_baseline)", err)
	}
	switch {
	case sp.Schema == nil || *sp.Schema != startupPlanSchema:
		return EngineLog{}, fmt.Errorf("startup plan: schema must be %d (vLLM 0.33's PLAN_SCHEMA_VERSION)", startupPlanSchema)
	case sp.KVBytes == nil || *sp.KVBytes <= 0:
		return EngineLog{}, fmt.Errorf("startup plan: kv_cache_memory_bytes must be a positive byte count (vLLM ignores a plan without one)")
	case sp.FreeBytes == nil || *sp.FreeBytes <= 0:
		return EngineLog{}, fmt.Errorf("startup plan: free_memory_baseline must be a positive byte count")
	}
	return EngineLog{Engine: "vllm", StartupPlan: sp.Fingerprint, Figures: []LogFigure{
		{What: LogSuggestedKV, Bytes: vram.Bytes(*sp.KVBytes), Line: 1},
		{What: LogFreeAtStart, Bytes: vram.Bytes(*sp.FreeBytes), Line: 1},
	}}, nil
}
