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
	cached, size, ok := readCachedGGUF(opt.CacheDir, dir, file)
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
		writeCachedGGUF(opt.CacheDir, dir, file, rr.got.Bytes(), rr.size)
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

func readCachedGGUF(cache, dir, file string) ([]byte, int64, bool) {
	p, ok := cachePath(cache, dir, file)
	if !ok {
		return nil, 0, false
	}
	meta, err := readPlain(p + ".size.json")
	if err != nil {
		return nil, 0, false
	}
	var c ggufCache
	if json.Unmarshal(meta, &c) != nil {
		return nil, 0, false
	}
	b, err := readPlain(p + vram.HeaderSuffix)
	if err != nil || len(b) > maxGGUFHeader {
		return nil, 0, false
	}
	return b, c.Size, true
}

// writeCachedGGUF keeps the header bytes; a failure to write only costs
// the next run a fetch. Each file is written beside its place and renamed
// into it, so a link planted at its name is replaced, never followed.
func writeCachedGGUF(cache, dir, file string, head []byte, size int64) {
	p := filepath.Join(dir, file)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	if _, ok := cachePath(cache, dir, file); !ok {
		return
	}
	if writeReplacing(p+vram.HeaderSuffix, head) != nil {
		return
	}
	meta, _ := json.Marshal(ggufCache{Size: size})
	_ = writeReplacing(p+".size.json", meta) // written last: the pair is complete
}

// cachePath is dir/file where its folder, links resolved, lies inside the
// cache: a folder of the cache replaced by a link elsewhere is not used.
func cachePath(cache, dir, file string) (string, bool) {
	p := filepath.Join(dir, file)
	root, err := filepath.EvalSymlinks(cache)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(cache, filepath.Dir(p))
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", false
	}
	real, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil || real != filepath.Join(root, rel) {
		return "", false
	}
	return p, true
}

// readPlain reads a regular file, not a link to one.
func readPlain(p string) ([]byte, error) {
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return os.ReadFile(p)
}

// writeReplacing writes data to a new file beside p and renames it to p.
func writeReplacing(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".part-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
