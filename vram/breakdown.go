package vram

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Breakdown is memory on one GPU by category. Categories never overlap and
// Total is exactly their sum.
type Breakdown struct {
	Parameters      Bytes `json:"parameters"`       // model weights as stored (quantized where so) + adapters + module buffers
	Gradients       Bytes `json:"gradients"`        // parameter gradients
	OptimizerStates Bytes `json:"optimizer_states"` // optimizer moments + fp32 master weights
	Activations     Bytes `json:"activations"`      // tensors saved for backward (and held logits)
	KVCache         Bytes `json:"kv_cache"`         // inference key/value cache
	Temporaries     Bytes `json:"temporaries"`      // transient buffers: op outputs in flight, gradients of activations, all-gathers, optimizer-step scratch
	Other           Bytes `json:"other"`            // inputs, communication buckets, library workspaces
}

// Category names in display order; charts use the same order and colors.
var Categories = []string{"parameters", "gradients", "optimizer_states", "activations", "kv_cache", "temporaries", "other"}

// Total is the sum of all categories.
func (b Breakdown) Total() Bytes {
	t := addBytes(b.Parameters, b.Gradients)
	t = addBytes(t, b.OptimizerStates)
	t = addBytes(t, b.Activations)
	t = addBytes(t, b.KVCache)
	t = addBytes(t, b.Temporaries)
	return addBytes(t, b.Other)
}

// Max returns the category-wise maximum.
func (b Breakdown) Max(o Breakdown) Breakdown {
	return Breakdown{
		Parameters:      max(b.Parameters, o.Parameters),
		Gradients:       max(b.Gradients, o.Gradients),
		OptimizerStates: max(b.OptimizerStates, o.OptimizerStates),
		Activations:     max(b.Activations, o.Activations),
		KVCache:         max(b.KVCache, o.KVCache),
		Temporaries:     max(b.Temporaries, o.Temporaries),
		Other:           max(b.Other, o.Other),
	}
}

func (b Breakdown) values() []Bytes {
	return []Bytes{b.Parameters, b.Gradients, b.OptimizerStates, b.Activations, b.KVCache, b.Temporaries, b.Other}
}

// Item is one category of a breakdown.
type Item struct {
	Category string `json:"category"`
	Bytes    Bytes  `json:"bytes"`
}

// Items lists the non-zero categories in display order.
func (b Breakdown) Items() []Item {
	var out []Item
	for i, v := range b.values() {
		if v != 0 {
			out = append(out, Item{Categories[i], v})
		}
	}
	return out
}

// Get returns one category by name (as in Categories).
func (b Breakdown) Get(category string) Bytes {
	for i, c := range Categories {
		if c == category {
			return b.values()[i]
		}
	}
	return 0
}

// Add returns the category-wise sum.
func (b Breakdown) Add(o Breakdown) Breakdown {
	return Breakdown{
		Parameters:      addBytes(b.Parameters, o.Parameters),
		Gradients:       addBytes(b.Gradients, o.Gradients),
		OptimizerStates: addBytes(b.OptimizerStates, o.OptimizerStates),
		Activations:     addBytes(b.Activations, o.Activations),
		KVCache:         addBytes(b.KVCache, o.KVCache),
		Temporaries:     addBytes(b.Temporaries, o.Temporaries),
		Other:           addBytes(b.Other, o.Other),
	}
}

// unitFor picks the IEC unit that suits the total.
func unitFor(total Bytes) Bytes {
	u, _ := total.unit()
	if u < MiB {
		return MiB
	}
	return u
}

// smallUnit is the unit a size below the table's is printed in.
func smallUnit(b Bytes) Bytes {
	u, _ := b.unit()
	if u < KiB {
		return KiB
	}
	return u
}

// String prints an aligned table in one unit (a row too small for it in
// its own), total last:
//
//	parameters          13.48 GiB   52.1%
//	gradients           13.48 GiB   47.9%
//	total               26.96 GiB
func (b Breakdown) String() string {
	var sb strings.Builder
	total := b.Total()
	u := unitFor(total)
	var small []string
	for _, it := range b.Items() {
		share := 0.0
		if total > 0 {
			share = 100 * float64(it.Bytes) / float64(total)
		}
		size := it.Bytes.Format(u, 2)
		if it.Bytes.In(u) < 0.005 {
			// Too small for the table's unit: in its own, not as 0.00.
			size = it.Bytes.Format(smallUnit(it.Bytes), 2)
		}
		name := strings.ReplaceAll(it.Category, "_", " ")
		if share < 0.05 {
			// Under 0.1 %: said with the total, not as a row of its own.
			small = append(small, name+" "+size)
			continue
		}
		fmt.Fprintf(&sb, "%-17s %12s %6.1f%%\n", name, size, share)
	}
	fmt.Fprintf(&sb, "%-17s %12s", "total", total.Format(u, 2))
	if len(small) > 0 {
		fmt.Fprintf(&sb, "   (with %s)", strings.Join(small, ", "))
	}
	sb.WriteString("\n")
	return sb.String()
}

// MarshalJSON adds the total for readers of the JSON.
func (b Breakdown) MarshalJSON() ([]byte, error) {
	type plain Breakdown
	return json.Marshal(struct {
		plain
		Total Bytes `json:"total"`
	}{plain(b), b.Total()})
}

// UnmarshalJSON reads what MarshalJSON writes (the total is recomputed).
func (b *Breakdown) UnmarshalJSON(data []byte) error {
	type plain Breakdown
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Breakdown(p)
	return nil
}
