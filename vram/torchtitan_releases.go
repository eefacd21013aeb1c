package vram

// torchtitan's releases as data (versions.go), as far as the engine's
// figures depend on them: whether its activation checkpointing stops a
// block's recomputation early (checkpoint_early_stop.go). Each row is
// the first release of a rule, read at its tag; a release between rows
// shares the older row's.

// torchtitanRelease is what a torchtitan release sets.
type torchtitanRelease struct {
	releaseRow
	// earlyStop: the checkpoint wrapper leaves torch's early stop on (the
	// recomputation ends once the last saved tensor exists); off, it runs
	// the whole block again.
	earlyStop bool
	// earlyStopOption: the release reads activation_checkpoint.early_stop
	// from its config (Training.CheckpointEarlyStop may set it).
	earlyStopOption bool
}

// torchtitanReleases are the modelled releases, oldest first (PyPI's
// torchtitan: 0.0.2 of 2024-04-16 to 0.3.0 of 2026-09-03).
var torchtitanReleases = []torchtitanRelease{
	{releaseRow: releaseRow{Version: "0.0.2", Source: "torchtitan/parallelisms/parallelize_llama.py 234, 272, 283 (read at 9dec370a, the development line after 0.0.2): ptd_checkpoint_wrapper(module, preserve_rng_state=False), torch's early stop on (torch/utils/checkpoint.py 1854, early_stop=True)"},
		earlyStop: true},
	{releaseRow: releaseRow{Version: "0.1.0", Source: "torchtitan v0.1.0 torchtitan/models/llama3/infra/parallelize.py 238, 276, 287: ptd_checkpoint_wrapper(module, preserve_rng_state=False), torch's early stop on"},
		earlyStop: true},
	{releaseRow: releaseRow{Version: "0.2.0", Source: "torchtitan v0.2.0 torchtitan/config/job_config.py 611 (activation_checkpoint.early_stop: bool = False, #1580) handed to every wrapper, torchtitan/distributed/activation_checkpoint.py 41, 129, 144"},
		earlyStopOption: true},
	{releaseRow: releaseRow{Version: "0.3.0", Source: "torchtitan 0.3.0 torchtitan/distributed/activation_checkpoint.py 180 (FullAC) and 285 (SelectiveAC): early_stop=False, no config option"}},
}

// CurrentTorchtitan is the torchtitan release a plan that names none is
// modelled with.
var CurrentTorchtitan = torchtitanReleases[len(torchtitanReleases)-1].Version

// torchtitanReleaseOf resolves a plan's torchtitan release
// (versions.torchtitan).
func torchtitanReleaseOf(asked string) (torchtitanRelease, Modelled, error) {
	return resolveRelease("torchtitan", asked, torchtitanReleases)
}
