package vram

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
}

// trlReleases are the modelled releases, oldest first.
var trlReleases = []TRLRelease{
	{releaseRow: releaseRow{Version: "0.25.0", Source: "trl 0.25.0 trainer/grpo_config.py:323 (max_prompt_length 512), 336 (max_completion_length 256)"},
		CompletionLen: 256, PromptLen: 512},
	{releaseRow: releaseRow{Version: "0.27.0", Source: "trl 0.27.0 trainer/grpo_config.py:425 (max_completion_length 256), 852 (max_prompt_length None: prompts not truncated; gone by 0.29.1)"},
		CompletionLen: 256},
	{releaseRow: releaseRow{Version: "1.10.0", Source: "trl 1.10.0 trainer/grpo_config.py:491 (max_completion_length 512, 256 up to 1.9.0's l.488; trl#6264)"},
		CompletionLen: 512},
	{releaseRow: releaseRow{Version: "1.16.0", Source: "trl 1.16.0 trainer/grpo_config.py:494 (max_completion_length 512; no max_prompt_length)"},
		CompletionLen: 512},
}

// CurrentTRL is the TRL release a plan that names none is modelled with.
var CurrentTRL = trlReleases[len(trlReleases)-1].Version

// TRLReleaseFor resolves a TRL release (versions.trl; empty: the current
// one) to its row and what the answer says it modelled.
func TRLReleaseFor(asked string) (TRLRelease, Modelled, error) {
	return resolveRelease("trl", asked, trlReleases)
}
