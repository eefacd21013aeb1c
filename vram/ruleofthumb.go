package vram

// RuleOfThumb is the working-set estimate of the source article (see
// notebooks/ and the project's seed article): everything in 16-bit, with
//
//	parameters 2N + activations k·2N + gradients 2N + Adam states 2·2N + inputs and buffers
//
// where k is 2–4 and the buffers 1–2 GB. With N = 7e9, k = 3 and 2 GB it
// gives 14 + 42 + 14 + 28 + 2 = 100 GB. It is a quick upper-level figure; the
// Training estimate is the precise one.
type RuleOfThumb struct {
	Params         float64 // N
	ActivationMult float64 // k in (2–4)·2N; zero means the middle value 3
	Buffers        Bytes   // inputs and temporary buffers; zero means the middle value 2 GB
}

// Breakdown returns the rule's terms by category (decimal GB as in the article).
func (r RuleOfThumb) Breakdown() Breakdown {
	k := r.ActivationMult
	if k == 0 {
		k = 3
	}
	buf := r.Buffers
	if buf == 0 {
		buf = 2 * GB
	}
	two := Bytes(2 * r.Params)
	return Breakdown{
		Parameters:      two,
		Activations:     Bytes(k * 2 * r.Params),
		Gradients:       two,
		OptimizerStates: 2 * two,
		Temporaries:     buf,
	}
}

// Total is the rule's working set.
func (r RuleOfThumb) Total() Bytes { return r.Breakdown().Total() }
