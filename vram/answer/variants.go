package answer

import "github.com/vramlab/vramlab/vram"

// Variant is the answer under one setting the plan leaves as the tool's
// default but the user's own script decides: the setting as a plan key,
// why it matters, and the allocated peak with it.
type Variant struct {
	Setting string     `json:"setting"` // e.g. "kbit_prep": true
	Why     string     `json:"why"`
	Peak    vram.Bytes `json:"peak_allocated"`
	Change  vram.Bytes `json:"change"` // Peak less the plan's own peak (negative: less)
}

// variants are the training plan t's variants: a QLoRA plan run through
// transformers without kbit_prep, with it — whether the script calls
// PEFT's prepare_model_for_kbit_training is the script's choice, and it
// turns every unquantized weight fp32 (vram/kbitprep.go).
func variants(t vram.Training, est vram.TrainingEstimate) ([]Variant, error) {
	if !t.QuantizedBase.Quantized() || t.KbitPrep || !t.Framework.RunsTransformers() {
		return nil, nil
	}
	k := t
	k.KbitPrep = true
	e, err := k.Estimate()
	if err != nil {
		return nil, nil // the variant does not apply (the plan's own answer stands)
	}
	peak := e.Peak.Total()
	if peak == est.Peak.Total() {
		return nil, nil // the base's unquantized weights are fp32 already
	}
	return []Variant{{Setting: `"kbit_prep": true`, Peak: peak, Change: peak - est.Peak.Total(),
		Why: "if the script calls PEFT's prepare_model_for_kbit_training, as the QLoRA recipe does, the embeddings, norms and head turn fp32 and the residual stream with them"}}, nil
}
