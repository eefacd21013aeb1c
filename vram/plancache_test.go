package vram

import (
	"bytes"
	"reflect"
	"testing"
)

// TestPlanKeyCoversEveryField: changing any field of a plan that a caller
// can set — through every pointer, in every list — changes its key, so no
// two plans that differ anywhere share a cached answer.
func TestPlanKeyCoversEveryField(t *testing.T) {
	var base Training
	fill(reflect.ValueOf(&base).Elem(), 0)
	want, ok := planKey(nil, &base)
	if !ok {
		t.Fatal("the filled plan has no key")
	}
	n := 0
	eachLeaf(reflect.ValueOf(&base).Elem(), "Training", func(path string, v reflect.Value) {
		old := reflect.ValueOf(v.Interface())
		bump(v)
		got, _ := planKey(nil, &base)
		if bytes.Equal(got, want) {
			t.Errorf("%s: changing it leaves the key as it was", path)
		}
		v.Set(old)
		n++
	})
	if after, _ := planKey(nil, &base); !bytes.Equal(after, want) {
		t.Error("the plan's key changed after every field was put back")
	}
	if n < 200 {
		t.Errorf("only %d fields changed: the walk missed the plan's nested values", n)
	}
}

// fill gives every pointer of v a value and every list one element, so
// that eachLeaf reaches the fields behind them. A Model nests Models (a
// vision tower, an audio tower, a draft, a speech generator's three
// stages), each nesting more: four levels reach every type's fields while
// the plan stays small enough to key each of its leaves changed in turn
// (six made the test O(2⁶) slower with each new nested tower), and a
// struct type already filled twice on the way down is left as it is, its
// pointers nil (the speech stages made each level five Models, not two).
func fill(v reflect.Value, depth int) { fillSeen(v, depth, map[reflect.Type]int{}) }

func fillSeen(v reflect.Value, depth int, seen map[reflect.Type]int) {
	if depth > 4 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillSeen(v.Elem(), depth+1, seen)
	case reflect.Struct:
		if seen[v.Type()] >= 2 {
			return
		}
		seen[v.Type()]++
		defer func() { seen[v.Type()]-- }()
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillSeen(v.Field(i), depth, seen)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		fillSeen(v.Index(0), depth+1, seen)
	case reflect.Map:
		if v.IsNil() {
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
			v.Set(m)
		}
	}
}

// eachLeaf calls f on every settable number, string and bool under v.
func eachLeaf(v reflect.Value, path string, f func(string, reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachLeaf(v.Elem(), path, f)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if fd := v.Type().Field(i); fd.IsExported() {
				eachLeaf(v.Field(i), path+"."+fd.Name, f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			eachLeaf(v.Index(i), path+"[i]", f)
		}
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if v.CanSet() {
			f(path, v)
		}
	}
}

// bump changes a leaf's value.
func bump(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 0.5)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	default:
		v.SetInt(v.Int() + 1)
	}
}

// TestCachedAnswersStayTrue: an estimate or replay asked for again comes
// from the cache and equals the one computed; a plan changed in place
// through a pointer it shares (its LoRA, its model's SSM) is answered
// anew; what a caller changes in an answer it got changes no later one;
// a replay, kept the first time it is computed, serves GPUs whose
// workspace agrees, each with its own context.
func TestCachedAnswersStayTrue(t *testing.T) {
	ForgetAnswers()
	lora := &LoRA{Rank: 16, Alpha: 32, Targets: []string{"q_proj", "v_proj"}}
	tr := Training{Model: MustPreset("bamba-9b"), SeqLen: 1024, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw", LoRA: lora}
	want, err := tr.estimate()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // computed, computed and kept, from the cache
		got, err := tr.Estimate()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("estimate %d: %v, differs from the computed one", i, err)
		}
		got.Notes = append(got.Notes[:0], "changed by the caller")
		if len(got.Block.Tensors) > 0 {
			got.Block.Tensors[0].Name = "changed"
		}
	}
	if key, _ := planKey(nil, &tr); func() bool { _, ok := estimates.get(key); return !ok }() {
		t.Error("a plan asked for three times is not in the cache")
	}
	lora.Targets[1] = "o_proj" // in place: the plan's key changes with it
	tr.Model.SSM.Heads /= 2
	changed, err := tr.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := tr.estimate()
	if !reflect.DeepEqual(changed, fresh) || changed.Peak == want.Peak {
		t.Errorf("after the plan changed in place: peak %v, computed %v (before: %v)", changed.Peak.Total(), fresh.Peak.Total(), want.Peak.Total())
	}

	h100, _ := LookupGPU("H100-80GB")
	h200, _ := LookupGPU("H200")
	rp := Training{Model: MustPreset("llama-3-8b"), SeqLen: 2048, MicroBatch: 1, Precision: "bf16", Optimizer: "adamw", Checkpointing: "full"}
	for i, g := range []GPU{h100, h100, h200} {
		g := g
		got, err := rp.Replay(ReplayOptions{GPU: &g})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 { // a replay is kept the first time
			key, _ := planKey(nil, &replayRequest{t: rp, workspace: gemmWorkspace(&g, "")})
			if _, ok := replays.get(key); !ok {
				t.Error("a replay computed once is not in the cache")
			}
		}
		computed, _ := rp.replay(ReplayOptions{GPU: &g})
		if got.PeakReserved != computed.PeakReserved || got.Context != g.Context || got.DeviceUsed != computed.PeakReserved+g.Context+computed.NCCL+computed.SymmetricMemory {
			t.Errorf("%s: reserved %v context %v device %v, computed reserved %v with context %v", g.Name, got.PeakReserved, got.Context, got.DeviceUsed, computed.PeakReserved, g.Context)
		}
	}
}

// TestCachedAnswersConcurrently: goroutines asking for the same plans at
// once (go test -race) get the computed answers.
func TestCachedAnswersConcurrently(t *testing.T) {
	ForgetAnswers()
	plans := arenaPlans()[:4]
	want := make([]TrainingEstimate, len(plans))
	for i, tr := range plans {
		var err error
		if want[i], err = tr.estimate(); err != nil {
			t.Fatal(err)
		}
	}
	concurrently(4, func(g int) {
		for n := 0; n < 4*len(plans); n++ {
			i := (n + g) % len(plans)
			got, err := plans[i].Estimate()
			if err != nil || !reflect.DeepEqual(got, want[i]) {
				t.Errorf("plan %d on goroutine %d: %v, or differs from the computed estimate", i, g, err)
				return
			}
		}
	})
}

// TestAnswersAreBounded: the cache keeps at most two generations.
func TestAnswersAreBounded(t *testing.T) {
	var c answers[int]
	for i := 0; i < 5*answersPerGeneration; i++ {
		key := []byte{byte(i), byte(i >> 8), byte(i >> 16)}
		if c.worthKeeping(key) {
			t.Fatalf("key %d seen before it was asked for", i)
		}
		c.put(key, i, 0)
	}
	if n := len(c.cur) + len(c.old); n > 2*answersPerGeneration {
		t.Errorf("%d answers kept, want at most %d", n, 2*answersPerGeneration)
	}
	if v, ok := c.get([]byte{0, 0, 0}); ok {
		t.Errorf("the first answer (%d) outlived four generations", v)
	}
	last := 5*answersPerGeneration - 1
	if v, ok := c.get([]byte{byte(last), byte(last >> 8), byte(last >> 16)}); !ok || v != last {
		t.Errorf("the last answer: %d, %v", v, ok)
	}
	// By size: a generation holds bytesPerGeneration; a larger answer is
	// not kept.
	var big answers[int]
	for i := 0; i < 12; i++ {
		big.put([]byte{byte(i)}, i, bytesPerGeneration/4)
	}
	if n := len(big.cur) + len(big.old); n > 8 {
		t.Errorf("%d answers of a quarter generation kept, want at most 8", n)
	}
	big.put([]byte("huge"), 1, bytesPerGeneration+1)
	if _, ok := big.get([]byte("huge")); ok {
		t.Error("an answer larger than a generation is kept")
	}
}
