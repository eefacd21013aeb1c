package vram

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A model on the Hugging Face hub is named hf://org/name[@revision]. Its
// config.json and safetensors headers — never the weights — come into a
// local folder through HubResolver, which package vram/hub sets when it
// is imported (the plan CLI imports it; a notebook adds
// `import _ "github.com/vramlab/vramlab/vram/hub"`). The folder is a
// checkpoint whose shards are header-only copies: X.safetensors.header
// holds X.safetensors' first 8 + header bytes, and HeadersManifest records
// each shard's size on the hub, which the reader checks against its header
// as it checks a whole file's size.

// HubResolver fetches an hf:// model's config.json and safetensors
// headers into a folder and returns it; nil until package vram/hub is
// imported.
var HubResolver func(ref string) (dir string, err error)

// HeadersManifest is the file, in a folder of header-only shards, that
// maps each shard's name to its size on the hub.
const HeadersManifest = "vramlab-headers.json"

// HeaderSuffix ends the name of a header-only shard.
const HeaderSuffix = ".header"

// IsHubRef reports whether s names a hub model (hf://org/name).
func IsHubRef(s string) bool { return strings.HasPrefix(s, "hf://") }

// openHub resolves ref and reads the folder it came into.
func openHub(ref string) (Checkpoint, error) {
	if HubResolver == nil {
		return Checkpoint{}, fmt.Errorf("model %s: hub ids are read by package vram/hub; import _ \"github.com/vramlab/vramlab/vram/hub\" (the plan CLI does)", ref)
	}
	dir, err := HubResolver(ref)
	if err != nil {
		return Checkpoint{}, err
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model %s: %w", ref, err)
	}
	return ck, nil
}

// shardFile opens shard name inside root and returns the size the whole
// file has: its own, or for a header-only copy the hub's size from the
// manifest.
func shardFile(root *os.Root, name string) (*os.File, int64, error) {
	if !exists(root, name) && exists(root, name+HeaderSuffix) {
		sizes, err := readManifest(root)
		if err != nil {
			return nil, 0, err
		}
		size, ok := sizes[name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: %s has no size for %s", root.Name(), HeadersManifest, name)
		}
		f, err := openIn(root, name+HeaderSuffix)
		return f, size, err
	}
	f, err := openIn(root, name)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func readManifest(root *os.Root) (map[string]int64, error) {
	b, err := readFileIn(root, HeadersManifest, MaxIndexFile)
	if err != nil {
		return nil, err
	}
	var sizes map[string]int64
	if err := json.Unmarshal(b, &sizes); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", root.Name(), HeadersManifest, err)
	}
	for n, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("%s: %s: %s has a negative size", root.Name(), HeadersManifest, n)
		}
	}
	return sizes, nil
}

// hasShard reports whether root holds shard name whole or as a header.
func hasShard(root *os.Root, name string) bool {
	return exists(root, name) || exists(root, name+HeaderSuffix)
}

var errNoSafetensors = errors.New("no model.safetensors or model.safetensors.index.json")
