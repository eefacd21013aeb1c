package vram

import "fmt"

// TRL's releases as data: what each modelled release's GRPOConfig
// defaults to that sizes a post-training step (the prompt and completion
// a config leaves unset), each row citing the release's
// trl/trainer/grpo_config.py. A release the table lacks is modelled by the
// newest row before it, with a note.

// TRLRelease is one modelled TRL release.
type TRLRelease struct {
	releaseRow
	// CompletionLen is GRPOConfig.max_completion_length's default.
	CompletionLen int
	// PromptLen is GRPOConfig.max_prompt_length's default, to which
	// prompts are truncated; 0 where the release truncates none (None,
	// or no such field).
	PromptLen int
	// VLLMMin and VLLMMax are the vLLM releases the release supports
	// (trl/import_utils.py is_vllm_available: outside them it warns and
	// runs; its `trl[vllm]` extra installs one within them).
	VLLMMin, VLLMMax string
}

// trlReleases are the modelled releases, oldest first.
var trlReleases = []TRLRelease{
	{releaseRow: releaseRow{Version: "0.25.0", Source: "trl 0.25.0 trainer/grpo_config.py:323 (max_prompt_length 512), 336 (max_completion_length 256)"},
		CompletionLen: 256, PromptLen: 512,
		VLLMMin: "0.10.2", VLLMMax: "0.10.2"}, // import_utils.py:89-92; METADATA: vllm==0.10.2
	{releaseRow: releaseRow{Version: "0.27.0", Source: "trl 0.27.0 trainer/grpo_config.py:425 (max_completion_length 256), 852 (max_prompt_length None: prompts not truncated; gone by 0.29.1)"},
		CompletionLen: 256, VLLMMin: "0.10.2", VLLMMax: "0.12.0"}, // import_utils.py:82-84; METADATA: vllm<0.13.0,>=0.10.2
	{releaseRow: releaseRow{Version: "1.10.0", Source: "trl 1.10.0 trainer/grpo_config.py:491 (max_completion_length 512, 256 up to 1.9.0's l.488; trl#6264)"},
		CompletionLen: 512, VLLMMin: "0.17.0", VLLMMax: "0.26.0"}, // import_utils.py:119-121; METADATA: vllm<=0.26.0,>=0.17.0
	{releaseRow: releaseRow{Version: "1.16.0", Source: "trl 1.16.0 trainer/grpo_config.py:494 (max_completion_length 512; no max_prompt_length)"},
		CompletionLen: 512, VLLMMin: "0.22.0", VLLMMax: "0.31.0"}, // import_utils.py:107-109; METADATA: vllm<=0.31.0,>=0.22.0
}

// CurrentTRL is the TRL release a plan that names none is modelled with.
var CurrentTRL = trlReleases[len(trlReleases)-1].Version

// TRLReleaseFor resolves a TRL release (versions.trl; empty: the current
// one) to its row and what the answer says it modelled.
func TRLReleaseFor(asked string) (TRLRelease, Modelled, error) {
	return resolveRelease("trl", asked, trlReleases)
}

// vllmOutsideRange is TRL's warning when the vLLM release a colocated
// rollout is modelled with lies outside what the TRL release supports
// (import_utils.py is_vllm_available), empty when it lies inside.
func (r TRLRelease) vllmOutsideRange(vllm string) string {
	if r.VLLMMin == "" {
		return ""
	}
	v, err := ParseVersion("vllm", vllm)
	if err != nil {
		return ""
	}
	lo, errLo := ParseVersion("vllm", r.VLLMMin)
	hi, errHi := ParseVersion("vllm", r.VLLMMax)
	if errLo != nil || errHi != nil || !v.Less(lo) && !hi.Less(v) {
		return ""
	}
	return fmt.Sprintf("TRL %s supports vLLM %s to %s and warns outside them (trl/import_utils.py); its trl[vllm] extra installs one of those: name post_training.rollout.version for the vLLM you run",
		r.Version, r.VLLMMin, r.VLLMMax)
}
