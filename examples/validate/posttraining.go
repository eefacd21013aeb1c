package main

import (
	"encoding/json"

	"github.com/vramlab/vramlab/vram"
)

// Post-training cases (kind "post_training"): the case's post_training
// object is a plan's (vram.PostTraining, with the case's model and GPU),
// predicted phase by phase. measured.what is the trainer's allocated peak
// over the phases (allocated_peak), what nvidia-smi shows at the largest
// phase (nvidia_smi), or that the published run ran on its GPUs ("runs",
// with measured.gib the memory it ran within): a verdict, agreeing when
// every phase fits.

// runsKind is a verdict that a published configuration ran.
const runsKind = "runs"

func predictPost(c Case) Result {
	res := Result{Case: c}
	if len(c.Post) == 0 || len(c.Model) == 0 {
		res.Skip = "cannot express: a post_training case needs its model and its post_training object"
		return res
	}
	g, err := vram.LookupGPU(c.GPU)
	if err != nil {
		res.Skip = "post-training needs a GPU of the catalog: " + err.Error()
		return res
	}
	plan, err := json.Marshal(map[string]any{"model": c.Model, "gpu": c.GPU, "post_training": c.Post})
	if err != nil {
		res.Skip = "cannot express: " + err.Error()
		return res
	}
	p, err := vram.ParsePlan(plan, "")
	if err != nil {
		res.Skip = "cannot express: " + err.Error()
		return res
	}
	est, err := p.PostTraining.Estimate(g)
	if err != nil {
		res.Skip = "cannot express: " + err.Error()
		return res
	}
	peak := est.Peak()
	res.Where = peak.Name
	measured := c.Measured.GiB * float64(vram.GiB)
	switch c.Measured.What {
	case "allocated_peak":
		for _, ph := range est.Phases {
			if ph.Allocated > res.Predicted {
				res.Predicted, res.Where = ph.Allocated, ph.Name
			}
		}
	case "nvidia_smi":
		res.Predicted = peak.DeviceUsed
	case runsKind:
		res.Predicted, res.Verdict = peak.DeviceUsed, true
		res.Agrees = est.Starts && float64(peak.DeviceUsed) <= measured
		if !est.Starts {
			res.Where = "would not start: " + est.Err
		}
		return res
	default:
		res.Skip = "unknown measured.what " + c.Measured.What + " for a post-training case"
		return res
	}
	res.Err = (float64(res.Predicted) - measured) / measured
	return res
}
