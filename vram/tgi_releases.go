package vram

// TGI's releases as data (versions.go). Text Generation Inference's last
// release is 3.3.7 (2025-12-18, the repository's newest tag); its warmup
// rules are the ones tgi.go models, read at that tag:
// server/text_generation_server/models/globals.py:32 (TGI_WIGGLE_ROOM 0.90),
// 38-48 (BLOCK_SIZE 16, 1 for flashinfer, 256 for flashdecoding),
// utils/dist.py:13 (CUDA_MEMORY_FRACTION 1.0), utils/import_utils.py:13-17
// (free memory less (1 − fraction) of the total), models/
// flash_causal_lm.py:1507-1563 (the warmup prefill, then the free memory
// times the wiggle room into blocks of every layer's K and V, plus the
// warmup batch's own).

// tgiReleases are the modelled releases, oldest first.
var tgiReleases = []releaseRow{
	{Version: "3.3.7", Source: "text-generation-inference v3.3.7: models/globals.py:32, 38-48; utils/dist.py:13; utils/import_utils.py:13-17; models/flash_causal_lm.py:1507-1563"},
}

// release resolves the launch's TGI release (versions.tgi).
func (t TGI) release() (Modelled, error) {
	_, m, err := pickRelease("tgi", t.Version, tgiReleases)
	return m, err
}
