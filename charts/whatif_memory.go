package charts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/vramlab/vramlab/vram"
)

// Remembered is the plan and GPU the last what-if (WhatIf) of this
// notebook ended at, when it started from this base plan and GPU; else
// the base unchanged. Each cell of a notebook runs as its own program, so
// the cells below the controls read the result with it:
//
//	var plan, target = charts.Remembered(vram.Training{…}, "A100-80GB")
//
// Editing the base (or another notebook) forgets what the controls set.
// The record is a small file in the system's temporary folder, one per
// notebook.
func Remembered(base vram.Training, gpu string) (vram.Training, string) {
	rec, ok := readMemory()
	if !ok || rec.From == "" || rec.From != fingerprint(base, gpu) {
		return base, gpu
	}
	t, g, err := rec.apply(base, gpu)
	if err != nil {
		return base, gpu
	}
	return t, g
}

// memory is what a what-if ended at: the settings it changed, in order,
// from the plan and GPU it started with (From); To is the result, so a
// what-if that starts there adds to the same record.
type memory struct {
	From, To string
	Set      [][2]string // field, value; model: a preset's name, "" for the base's own
	GPU      string
}

func (m memory) apply(t vram.Training, gpu string) (vram.Training, string, error) {
	own := t.Model
	for _, s := range m.Set {
		var err error
		switch {
		case s[0] == "model" && s[1] == "":
			t.Model = own
		case s[0] == "model":
			t.Model = vram.FromPreset(s[1])
		default:
			t, err = t.Set(s[0], s[1])
		}
		if err != nil {
			return t, gpu, err
		}
	}
	if m.GPU != "" {
		gpu = m.GPU
	}
	return t, gpu, t.Validate()
}

// remember records where a what-if ended: started at start (on startGPU),
// it changed set and chose gpu. A what-if that started where the last
// record ended continues that record.
func remember(start vram.Training, startGPU string, set [][2]string, end vram.Training, gpu string) {
	from := fingerprint(start, startGPU)
	rec := memory{From: from, Set: set, GPU: gpu}
	if old, ok := readMemory(); ok && old.To == from {
		rec.From, rec.Set = old.From, append(slices.Clip(old.Set), set...)
		if gpu == startGPU {
			rec.GPU = old.GPU
		}
	}
	rec.To = fingerprint(end, gpu)
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	_ = os.MkdirAll(filepath.Dir(memoryFile()), 0o700)
	_ = os.WriteFile(memoryFile(), b, 0o600)
}

// maxMemory bounds the record a what-if reads back (a few hundred bytes).
const maxMemory = 64 << 10

func readMemory() (memory, bool) {
	f, err := os.Open(memoryFile())
	if err != nil {
		return memory{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMemory+1))
	var m memory
	if err != nil || len(b) > maxMemory || json.Unmarshal(b, &m) != nil || len(m.Set) > 64 {
		return memory{}, false
	}
	return m, true
}

// memoryFile is this notebook's record: Jupyter Server names the
// notebook of a kernel's session in JPY_SESSION_NAME; a run without one
// (a script) keys it by the folder it runs in.
func memoryFile() string {
	key := os.Getenv("JPY_SESSION_NAME")
	if key == "" {
		key, _ = os.Getwd()
	}
	h := sha256.Sum256([]byte(key))
	return filepath.Join(os.TempDir(), "vramlab-whatif", hex.EncodeToString(h[:8])+".json")
}

// fingerprint names a plan and GPU ("" for a plan that does not encode:
// it is never matched).
func fingerprint(t vram.Training, gpu string) string {
	b, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(append(b, gpu...))
	return hex.EncodeToString(h[:])
}
