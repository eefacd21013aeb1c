package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/vram"
)

// maxGGUFHeader is the most of a GGUF file read for its header: the local
// reader's budget (vocabularies of a few hundred thousand tokens take tens
// of MB).
const maxGGUFHeader = 512 << 20

// ReadGGUF reads the header of a GGUF file on the hub,
// hf://org/name[@revision]/file.gguf, by range requests as far as the
// header goes, and keeps those bytes in the cache for the next time.
func ReadGGUF(ctx context.Context, ref string, opt Options) (*vram.GGUF, error) {
	repoRef, file, err := splitFileRef(ref)
	if err != nil {
		return nil, err
	}
	r, err := ParseRef(repoRef)
	if err != nil {
		return nil, err
	}
	dir := r.folder(opt.CacheDir) + "-gguf" // apart from Resolve's folder, which a fetch replaces whole
	cached, size, ok := readCachedGGUF(dir, file)
	if !ok {
		if opt.Offline {
			return nil, fmt.Errorf("%s: %w", ref, ErrOffline)
		}
		rr := &rangeReader{ctx: ctx, f: newFetcher(opt, r), name: file, chunk: 1 << 20}
		g, err := vram.ParseGGUF(rr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		if err := g.CheckSize(rr.size); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		writeCachedGGUF(dir, file, rr.got.Bytes(), rr.size)
		return g, nil
	}
	g, err := vram.ParseGGUF(bytes.NewReader(cached))
	if err == nil {
		err = g.CheckSize(size)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (cached): %w", ref, err)
	}
	return g, nil
}

// splitFileRef splits hf://org/name[@rev]/path/to/file.gguf.
func splitFileRef(ref string) (string, string, error) {
	rest, ok := strings.CutPrefix(ref, "hf://")
	parts := strings.SplitN(rest, "/", 3)
	if !ok || len(parts) < 3 || !strings.HasSuffix(parts[2], ".gguf") || !filepath.IsLocal(parts[2]) {
		return "", "", fmt.Errorf("%q: a GGUF file on the hub is hf://org/name[@revision]/file.gguf", ref)
	}
	return "hf://" + parts[0] + "/" + parts[1], parts[2], nil
}

// rangeReader reads a hub file from the start, a chunk per request,
// keeping what it read; it stops at maxGGUFHeader.
type rangeReader struct {
	ctx   context.Context
	f     *fetcher
	name  string
	chunk int64
	off   int64
	size  int64 // the file's, once known
	buf   []byte
	got   bytes.Buffer
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.size > 0 && r.off >= r.size {
			return 0, io.EOF
		}
		if r.off >= maxGGUFHeader {
			return 0, fmt.Errorf("the header passes %d MiB", maxGGUFHeader>>20)
		}
		n := r.chunk
		if r.size > 0 {
			n = min(n, r.size-r.off)
		}
		b, size, err := r.f.rangeGet(r.ctx, r.name, r.off, n)
		if err != nil {
			return 0, err
		}
		r.buf, r.size, r.off = b, size, r.off+int64(len(b))
		r.got.Write(b)
		r.chunk = min(2*r.chunk, 64<<20) // a large vocabulary takes a few doublings
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

type ggufCache struct {
	Size int64 `json:"size"`
}

func readCachedGGUF(dir, file string) ([]byte, int64, bool) {
	meta, err := os.ReadFile(filepath.Join(dir, file+".size.json"))
	if err != nil {
		return nil, 0, false
	}
	var c ggufCache
	if json.Unmarshal(meta, &c) != nil {
		return nil, 0, false
	}
	b, err := os.ReadFile(filepath.Join(dir, file+vram.HeaderSuffix))
	if err != nil || len(b) > maxGGUFHeader {
		return nil, 0, false
	}
	return b, c.Size, true
}

// writeCachedGGUF keeps the header bytes; a failure to write only costs
// the next run a fetch.
func writeCachedGGUF(dir, file string, head []byte, size int64) {
	p := filepath.Join(dir, file)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	if os.WriteFile(p+vram.HeaderSuffix, head, 0o644) != nil {
		return
	}
	meta, _ := json.Marshal(ggufCache{Size: size})
	_ = os.WriteFile(p+".size.json", meta, 0o644) // written last: the pair is complete
}
