package answer

import (
	"errors"
	"fmt"

	"github.com/vramlab/vramlab/vram"
)

// PostTrainingReport is a post-training plan's estimate on its GPU.
type PostTrainingReport struct {
	vram.PostTrainingEstimate
	Algorithm string `json:"algorithm"`
	Framework string `json:"framework"`
	// MaxCompletionLen is the longest completion whose every phase fits
	// (the plan's other settings unchanged).
	MaxCompletionLen int `json:"max_completion_len"`
	// Host is the most host memory a phase holds for one GPU.
	Host vram.Bytes `json:"host"`
}

// forPostTraining estimates every phase of a post-training step on
// the plan's GPU, and the verdict.
func forPostTraining(p vram.Plan, rep Report) (Report, error) {
	if p.GPU == "" {
		return rep, errors.New(`gpu: a post-training plan needs the GPU it runs on ("gpu"): the rollout engine's share is a share of that card`)
	}
	g, err := vram.ParseCapacity(p.GPU)
	if err != nil {
		return rep, fmt.Errorf("gpu: %w", err)
	}
	pt := *p.PostTraining
	e, err := pt.Estimate(g)
	if err != nil {
		return rep, err
	}
	b := vram.Budget{GPU: g, Headroom: Margin}
	n, err := pt.MaxCompletionLen(b)
	if err != nil {
		return rep, err
	}
	rep.PostTraining = &PostTrainingReport{PostTrainingEstimate: e, Algorithm: pt.Algorithm, Framework: pt.Framework, MaxCompletionLen: n, Host: e.Host()}
	rep.Phases = e.Phases
	peak := e.Peak()
	rep.Peak = peak.Allocated
	rep.Measures = Measures{Allocated: peak.Allocated, Reserved: peak.Reserved, DeviceUsed: peak.DeviceUsed, Context: g.Context}
	v, err := b.JudgePostTraining(pt)
	if err != nil {
		return rep, err
	}
	rep.Fit = &Fit{GPU: g.Name, Capacity: g.Total(), Margin: Margin, Verdict: v}
	if !v.Fits {
		as, err := vram.AdvisePostTraining(pt, b)
		if err != nil {
			return rep, err
		}
		for _, a := range as[:min(len(as), maxAdvice)] {
			rep.Advice = append(rep.Advice, AdviceLine{Change: a.Change, Flags: a.Flags, Fits: a.Fits, Need: a.Need, Over: a.Over})
		}
	}
	return rep, nil
}
