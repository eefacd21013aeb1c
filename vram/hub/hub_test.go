package hub

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
	"github.com/vramlab/vramlab/vram/importer"
)

// repo is a hub repository a test serves: small files whole, shards as
// a header followed by as many zero bytes as the header says, made up as
// they are asked for (so a test can count what was asked).
type repo struct {
	files  map[string][]byte
	shards map[string]shard
}

type shard struct {
	head []byte // 8-byte length + JSON header
	size int64  // the whole file
}

// fixture lays model m out as a two-shard bf16 checkpoint.
func fixture(t *testing.T, m vram.Model) repo {
	t.Helper()
	cfg, err := json.Marshal(m.HFConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := repo{files: map[string][]byte{"config.json": cfg}, shards: map[string]shard{}}
	names := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	headers := []map[string]any{{}, {}}
	ends := []int64{0, 0}
	weightMap := map[string]string{}
	for i, x := range m.Tensors() {
		k := i % 2
		n := int64(2)
		for _, d := range x.Shape {
			n *= d
		}
		headers[k][x.Name] = map[string]any{"dtype": "BF16", "shape": x.Shape, "data_offsets": []int64{ends[k], ends[k] + n}}
		ends[k] += n
		weightMap[x.Name] = names[k]
	}
	for k, h := range headers {
		js, _ := json.Marshal(h)
		head := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
		head = append(head, js...)
		r.shards[names[k]] = shard{head: head, size: int64(len(head)) + ends[k]}
	}
	r.files["model.safetensors.index.json"], _ = json.Marshal(map[string]any{"weight_map": weightMap})
	return r
}

// server serves r under /{repo}/resolve/{rev}/ and records each request's
// path, range and Authorization.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

// requests are the requests seen so far.
func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func serve(t *testing.T, r repo, wrap func(http.ResponseWriter, *http.Request) bool) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, req.URL.Path+" "+req.Header.Get("Range")+" "+req.Header.Get("Authorization"))
		s.mu.Unlock()
		if wrap != nil && wrap(w, req) {
			return
		}
		_, name, ok := strings.Cut(req.URL.Path, "/resolve/main/")
		if !ok {
			http.NotFound(w, req)
			return
		}
		if b, ok := r.files[name]; ok {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
			return
		}
		sh, ok := r.shards[name]
		if !ok {
			http.NotFound(w, req)
			return
		}
		serveShard(w, req, sh)
	}))
	t.Cleanup(s.Close)
	return s
}

// serveShard answers a Range request from the virtual file.
func serveShard(w http.ResponseWriter, req *http.Request, sh shard) {
	from, to, ok := shardRange(req, sh)
	if !ok {
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, sh.size))
	w.Header().Set("Content-Length", strconv.FormatInt(to-from+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	io.Copy(w, shardBody(sh, from, to))
}

// shardRange reads the request's range, clamped to the file as servers
// clamp it (RFC 9110 §14.1.2).
func shardRange(req *http.Request, sh shard) (int64, int64, bool) {
	var from, to int64
	if _, err := fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-%d", &from, &to); err != nil || to < from || from >= sh.size {
		return 0, 0, false
	}
	return from, min(to, sh.size-1), true
}

// shardBody streams bytes [from, to] of the virtual file: the header's,
// then zeros.
func shardBody(sh shard, from, to int64) io.Reader {
	var head []byte
	if from < int64(len(sh.head)) {
		head = sh.head[from:min(int64(len(sh.head)), to+1)]
	}
	return io.MultiReader(bytes.NewReader(head), io.LimitReader(zeros{}, to-from+1-int64(len(head))))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func options(t *testing.T, s *server) Options {
	return Options{Endpoint: s.URL, CacheDir: t.TempDir(), Timeout: 10 * time.Second, Token: "hf_test"}
}

func resolve(opt Options, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opt.Timeout)
	defer cancel()
	return Resolve(ctx, ref, opt)
}

// TestResolve: config.json and both shards' headers come into the cache
// with nothing past the headers asked; the engine reads the folder as a
// checkpoint of the model's exact parameters; a second resolve needs no
// network, and offline the cache is all there is.
func TestResolve(t *testing.T) {
	m := vram.MustPreset("llama-3.2-1b")
	s := serve(t, fixture(t, m), nil)
	opt := options(t, s)
	dir, err := resolve(opt, "hf://meta-llama/Llama-3.2-1B")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := vram.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ck.Model.ParamCount(), m.ParamCount(); got != want {
		t.Errorf("params %d, want %d", got, want)
	}
	if ck.Total != vram.Bytes(2*m.ParamCount()) {
		t.Errorf("stored %v, want %v (bf16)", ck.Total, vram.Bytes(2*m.ParamCount()))
	}
	for _, r := range s.requests() {
		if !strings.HasSuffix(r, " Bearer hf_test") {
			t.Errorf("request %q without the token", r)
		}
		var from, to int64
		if _, err := fmt.Sscanf(strings.Fields(r)[1], "bytes=%d-%d", &from, &to); err == nil && to > 1<<20 {
			t.Errorf("request %q reaches past the header", r)
		}
	}
	if seen := s.requests(); len(seen) != 6 { // config, index, 2 × (length, header)
		t.Errorf("%d requests, want 6: %q", len(seen), seen)
	}
	s.Close()
	if again, err := resolve(opt, "hf://meta-llama/Llama-3.2-1B"); err != nil || again != dir {
		t.Errorf("from the cache: %q, %v", again, err)
	}
	opt.Offline = true
	if _, err := resolve(opt, "hf://meta-llama/Llama-3.2-1B@v2"); !errors.Is(err, ErrOffline) {
		t.Errorf("offline, not cached: %v", err)
	}
}

// TestResolveFailures: each way a hub can fail is one line that says what
// to do, and leaves nothing in the cache that looks complete.
func TestResolveFailures(t *testing.T) {
	good := fixture(t, vram.MustPreset("llama-3.2-1b"))
	status := func(code int, hdr ...string) func(http.ResponseWriter, *http.Request) bool {
		return func(w http.ResponseWriter, _ *http.Request) bool {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(code)
			return true
		}
	}
	lyingSize := fixture(t, vram.MustPreset("llama-3.2-1b"))
	for k, sh := range lyingSize.shards {
		sh.size += 4096
		lyingSize.shards[k] = sh
	}
	hugeHeader := fixture(t, vram.MustPreset("llama-3.2-1b"))
	for k, sh := range hugeHeader.shards {
		binary.LittleEndian.PutUint64(sh.head, 1<<40)
		hugeHeader.shards[k] = sh
	}
	for _, c := range []struct {
		name  string
		repo  repo
		wrap  func(http.ResponseWriter, *http.Request) bool
		token string
		ref   string
		want  string
	}{
		{"gated", good, status(401), "", "", "gated or private; set HF_TOKEN"},
		{"no access", good, status(403), "hf_x", "", "HF_TOKEN has no access"},
		{"missing", good, status(404), "", "", "config.json: 404 Not Found: no such repository, revision or file"},
		{"rate limited", good, status(429, "Retry-After", "30"), "", "", "rate-limiting this address; retry after 30 s"},
		{"server error", good, status(502), "", "", "the hub answered 502 Bad Gateway"},
		{"truncated", good, func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "config.json") {
				return false
			}
			w.Header().Set("Content-Length", "5000")
			w.Write([]byte(`{"model_type": "ll`))
			return true
		}, "", "", "config.json"},
		{"short range", good, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Range") == "" {
				return false
			}
			w.Header().Set("Content-Range", "bytes 0-7/100")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte{1, 2, 3})
			return true
		}, "", "", "truncated: 3 of 8 bytes"},
		{"wrong range", good, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Range") == "" {
				return false
			}
			w.Header().Set("Content-Range", "bytes 100-107/1000")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(make([]byte, 8))
			return true
		}, "", "", `does not answer bytes 0-7`},
		{"no size", good, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Range") == "" {
				return false
			}
			w.(http.Flusher).Flush() // chunked: no Content-Length
			w.Write(make([]byte, 8))
			return true
		}, "", "", "neither serves ranges nor says the file's size"},
		{"huge header", hugeHeader, nil, "", "", "header length 1099511627776 is out of range"},
		{"bad ref", good, nil, "", "hf://../etc", "the repository must be org/name"},
		{"bad revision", good, nil, "", "hf://a/b@..", "is not a branch, tag or commit name"},
	} {
		s := serve(t, c.repo, c.wrap)
		opt := options(t, s)
		opt.Token = c.token
		ref := orDefault(c.ref, "hf://meta-llama/Llama-3.2-1B")
		_, err := resolve(opt, ref)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", c.name, err, c.want)
		}
		if complete(Ref{Repo: "meta-llama/Llama-3.2-1B", Revision: "main"}.folder(opt.CacheDir)) {
			t.Errorf("%s: a failed fetch left a complete-looking folder", c.name)
		}
	}
	// The header reads, but the hub's size is not what it describes: the
	// engine says so when it reads the folder.
	s := serve(t, lyingSize, nil)
	dir, err := resolve(options(t, s), "hf://meta-llama/Llama-3.2-1B")
	if err == nil {
		_, err = vram.OpenCheckpoint(dir)
	}
	if err == nil || !strings.Contains(err.Error(), "truncated or padded") {
		t.Errorf("lying size: %v", err)
	}
}

// TestResolveSlowAndRedirected: a hub that does not answer is cut off at
// the deadline; a redirect to another host (the hub's CDN) is followed
// without the token, and a server that ignores ranges is read only as far
// as the header.
func TestResolveSlowAndRedirected(t *testing.T) {
	good := fixture(t, vram.MustPreset("llama-3.2-1b"))
	slow := serve(t, good, func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
		return false
	})
	opt := options(t, slow)
	opt.Timeout = 200 * time.Millisecond
	start := time.Now()
	if _, err := resolve(opt, "hf://meta-llama/Llama-3.2-1B"); err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("slow hub: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("the deadline did not stop the fetch (%v)", time.Since(start))
	}

	cdn := serve(t, good, nil)
	cdnURL := strings.Replace(cdn.URL, "127.0.0.1", "localhost", 1)
	front := serve(t, good, func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, ".safetensors") && !strings.HasSuffix(r.URL.Path, ".json") {
			http.Redirect(w, r, cdnURL+r.URL.Path, http.StatusFound)
			return true
		}
		return false
	})
	if _, err := resolve(options(t, front), "hf://meta-llama/Llama-3.2-1B"); err != nil {
		t.Fatal(err)
	}
	for _, r := range cdn.requests() {
		if strings.Contains(r, "Bearer") {
			t.Errorf("the token went to the redirect's host: %q", r)
		}
		if !strings.Contains(r, "bytes=") {
			t.Errorf("the redirect lost the range: %q", r)
		}
	}

	whole := serve(t, good, func(w http.ResponseWriter, r *http.Request) bool {
		_, name, _ := strings.Cut(r.URL.Path, "/resolve/main/")
		sh, ok := good.shards[name]
		if !ok {
			return false
		}
		w.Header().Set("Content-Length", strconv.FormatInt(sh.size, 10))
		w.Write(sh.head)
		w.Write(make([]byte, 1<<20)) // a client that read it all would wait for the rest
		return true
	})
	dir, err := resolve(options(t, whole), "hf://meta-llama/Llama-3.2-1B")
	if err == nil {
		_, err = vram.OpenCheckpoint(dir)
	}
	if err != nil {
		t.Errorf("a server without ranges: %v", err)
	}
}

// TestHubPlan: a plan's model "hf://org/name" resolves through the
// environment's hub and cache.
func TestHubPlan(t *testing.T) {
	m := vram.MustPreset("llama-3.2-1b")
	s := serve(t, fixture(t, m), nil)
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	p, err := vram.ParsePlan([]byte(`{"model": "hf://meta-llama/Llama-3.2-1B", "inference": {"batch": 1, "prompt_tokens": 128, "new_tokens": 16}}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p.Model.ParamCount() != m.ParamCount() || p.Checkpoint == nil {
		t.Errorf("hf:// plan: %d params, checkpoint %v", p.Model.ParamCount(), p.Checkpoint != nil)
	}
	// A config naming a model the catalog lacks takes the hub's.
	imp, err := importer.Import("train.sh", []byte("trl sft --model_name_or_path my-org/my-1b-finetune --max_length 512"),
		importer.Options{Model: "hf://meta-llama/Llama-3.2-1B"})
	if err != nil || imp.Plan.Model.ParamCount() != m.ParamCount() {
		t.Errorf("import with -model hf://: %v", err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	s.Close()
	if _, err := vram.ParsePlan([]byte(`{"model": "hf://meta-llama/Llama-3.2-1B", "inference": {"batch": 1, "prompt_tokens": 128}}`), t.TempDir()); err != nil {
		t.Errorf("offline from the cache: %v", err)
	}
}

// TestReadGGUF: a GGUF file's header comes by ranges, a few chunks and
// nowhere near its tensors' data, and is kept for the next time.
func TestReadGGUF(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "testdata", "gguf", "every-type.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := vram.ReadGGUF(filepath.Join("..", "testdata", "gguf", "every-type.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	r := repo{files: map[string][]byte{}, shards: map[string]shard{"m-Q4_K_M.gguf": {head: file, size: int64(len(file))}}}
	s := serve(t, r, nil)
	opt := options(t, s)
	ctx := context.Background()
	g, err := ReadGGUF(ctx, "hf://org/m-GGUF/m-Q4_K_M.gguf", opt)
	if err != nil {
		t.Fatal(err)
	}
	if g.Total() != local.Total() || len(g.Tensors) != len(local.Tensors) || g.Architecture() != local.Architecture() {
		t.Errorf("from the hub: %v in %d tensors (%s), locally %v in %d (%s)", g.Total(), len(g.Tensors), g.Architecture(), local.Total(), len(local.Tensors), local.Architecture())
	}
	s.Close()
	if _, err := ReadGGUF(ctx, "hf://org/m-GGUF/m-Q4_K_M.gguf", opt); err != nil {
		t.Errorf("from the cache: %v", err)
	}
	for _, bad := range []string{"hf://org/m-GGUF", "hf://org/m-GGUF/../x.gguf", "hf://org/m-GGUF/w.safetensors"} {
		if _, err := ReadGGUF(ctx, bad, opt); err == nil || !strings.Contains(err.Error(), "hf://org/name[@revision]/file.gguf") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestCacheKeysDoNotCollide: ids the cache would file in one folder
// (models--a--b--c) are refused, as the hub refuses -- and .. in ids.
func TestCacheKeysDoNotCollide(t *testing.T) {
	for _, id := range []string{"hf://a--b/c", "hf://a/b--c", "hf://a/b..c"} {
		if _, err := ParseRef(id); err == nil || !strings.Contains(err.Error(), "no -- or ..") {
			t.Errorf("%s: %v", id, err)
		}
	}
	a, _ := ParseRef("hf://a-b/c")
	b, _ := ParseRef("hf://a/b-c")
	if a.folder("x") == b.folder("x") {
		t.Errorf("a-b/c and a/b-c share %s", a.folder("x"))
	}
}

// TestGGUFCacheFollowsNoLinks: a link planted where the cache keeps a
// header is replaced, never written through, and a link in its place is
// not read.
func TestGGUFCacheFollowsNoLinks(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "testdata", "gguf", "every-type.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	r := repo{files: map[string][]byte{}, shards: map[string]shard{"m.gguf": {head: file, size: int64(len(file))}}}
	s := serve(t, r, nil)
	opt := options(t, s)
	ref, _ := ParseRef("hf://org/m-GGUF")
	dir := ref.folder(opt.CacheDir) + "-gguf"
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	os.MkdirAll(dir, 0o755)
	os.Symlink(victim, filepath.Join(dir, "m.gguf"+vram.HeaderSuffix))
	if _, err := ReadGGUF(context.Background(), "hf://org/m-GGUF/m.gguf", opt); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Errorf("the cache wrote through a planted link: the victim now holds %d bytes", len(b))
	}
	if fi, err := os.Lstat(filepath.Join(dir, "m.gguf"+vram.HeaderSuffix)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the cached header is not a regular file: %v", err)
	}
	// A folder of the cache replaced by a link to a complete copy
	// elsewhere is not read (offline, it is not in the cache), and a
	// fetch writes nothing through it.
	elsewhere := t.TempDir()
	for _, f := range []string{"m.gguf" + vram.HeaderSuffix, "m.gguf.size.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(elsewhere, f), b, 0o644)
	}
	os.RemoveAll(dir)
	os.Symlink(elsewhere, dir)
	offline := opt
	offline.Offline = true
	if _, err := ReadGGUF(context.Background(), "hf://org/m-GGUF/m.gguf", offline); !errors.Is(err, ErrOffline) {
		t.Errorf("offline through a linked folder: %v, want it not in the cache", err)
	}
	os.Remove(filepath.Join(elsewhere, "m.gguf"+vram.HeaderSuffix))
	if _, err := ReadGGUF(context.Background(), "hf://org/m-GGUF/m.gguf", opt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "m.gguf"+vram.HeaderSuffix)); err == nil {
		t.Errorf("a fetch wrote its header through a linked folder")
	}
}

// memHub serves one repository from memory, for the fuzzer.
type memHub struct{ r repo }

func (h memHub) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{}, Body: http.NoBody, Request: req, ContentLength: 0}
	_, name, _ := strings.Cut(req.URL.Path, "/resolve/main/")
	if b, ok := h.r.files[name]; ok {
		resp.StatusCode, resp.Status, resp.Body, resp.ContentLength = 200, "200 OK", io.NopCloser(bytes.NewReader(b)), int64(len(b))
	} else if sh, ok := h.r.shards[name]; ok {
		from, to, ok := shardRange(req, sh)
		if !ok {
			resp.StatusCode, resp.Status = 416, "416 Requested Range Not Satisfiable"
			return resp, nil
		}
		resp.StatusCode, resp.Status, resp.ContentLength = 206, "206 Partial Content", to-from+1
		resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, sh.size))
		resp.Body = io.NopCloser(shardBody(sh, from, to))
	}
	return resp, nil
}

// FuzzShardHeader: whatever a hub serves as a shard's first bytes and
// size, the fetch ends within the budget in a folder or an error.
func FuzzShardHeader(f *testing.F) {
	good := fixture(&testing.T{}, vram.MustPreset("llama-3.2-1b"))
	for _, sh := range good.shards {
		f.Add(sh.head, sh.size)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'}, int64(10))
	cfg := good.files["config.json"]
	cache := f.TempDir()
	f.Fuzz(func(t *testing.T, head []byte, size int64) {
		r := repo{files: map[string][]byte{"config.json": cfg}, shards: map[string]shard{"model.safetensors": {head: head, size: size}}}
		opt := Options{Endpoint: "http://hub.invalid", CacheDir: filepath.Join(cache, strconv.Itoa(len(head))), Timeout: time.Second,
			Client: &http.Client{Transport: memHub{r}}}
		// What the hub serves: the first 8 bytes and the header they
		// claim, as far as the file goes.
		first := make([]byte, 8) // past the header's bytes the file is zeros
		copy(first, head)
		served := max(int64(len(head)), 8+min(int64(binary.LittleEndian.Uint64(first)&(1<<62-1)), max(0, size-8), vram.MaxSafetensorsHead))
		budget.Check(t, int(served), func() {
			if dir, err := resolve(opt, "hf://a/b"); err == nil {
				_, _ = vram.OpenCheckpoint(dir)
				os.RemoveAll(dir)
			}
		})
	})
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
