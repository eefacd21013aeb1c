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
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio"
)

// fetcher reads one revision's files from the hub.
type fetcher struct {
	opt    Options
	ref    Ref
	client *http.Client
	base   string // …/{repo}/resolve/{revision}/
}

func newFetcher(opt Options, r Ref) *fetcher {
	c := opt.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	end := strings.TrimRight(opt.Endpoint, "/")
	if end == "" {
		end = DefaultEndpoint
	}
	return &fetcher{opt: opt, ref: r, client: c, base: end + "/" + r.Repo + "/resolve/" + url.PathEscape(r.Revision) + "/"}
}

// errNotFound is a 404: a file the repository does not have.
var errNotFound = errors.New("404 Not Found")

// fetchAll writes config.json, the index and every shard's header into a
// fresh folder beside dir, then renames it into place, so a cut-off fetch
// never leaves a folder that looks complete.
func (f *fetcher) fetchAll(ctx context.Context, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".part-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cfg, err := f.get(ctx, "config.json", vram.MaxConfigFile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	shards, err := f.index(ctx, tmp)
	if err != nil {
		return err
	}
	sizes := map[string]int64{}
	left := int64(vram.MaxHeadersBytes)
	for _, s := range shards {
		head, total, err := f.header(ctx, s, &left)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, s+vram.HeaderSuffix), head, 0o644); err != nil {
			return err
		}
		sizes[s] = total
	}
	manifest, _ := json.MarshalIndent(sizes, "", " ")
	if err := os.WriteFile(filepath.Join(tmp, vram.HeadersManifest), manifest, 0o644); err != nil {
		return err
	}
	os.RemoveAll(dir)
	return os.Rename(tmp, dir)
}

// index reads model.safetensors.index.json (a sharded checkpoint) into
// tmp and returns its shards, or model.safetensors alone where there is
// none.
func (f *fetcher) index(ctx context.Context, tmp string) ([]string, error) {
	b, err := f.get(ctx, "model.safetensors.index.json", vram.MaxIndexFile)
	if errors.Is(err, errNotFound) {
		return []string{"model.safetensors"}, nil
	}
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("model.safetensors.index.json: not a safetensors index (want a non-empty \"weight_map\")")
	}
	set := map[string]bool{}
	for tensor, s := range idx.WeightMap {
		if !strings.HasSuffix(s, ".safetensors") || !filepath.IsLocal(s) || strings.ContainsAny(s, "\\") {
			return nil, fmt.Errorf("model.safetensors.index.json: tensor %q: shard %q must be a .safetensors file inside the repository", tensor, s)
		}
		set[s] = true
	}
	if len(set) > vram.MaxShards {
		return nil, fmt.Errorf("model.safetensors.index.json names %d shards, more than the %d a checkpoint may have", len(set), vram.MaxShards)
	}
	shards := make([]string, 0, len(set))
	for s := range set {
		shards = append(shards, s)
		if d := filepath.Dir(s); d != "." {
			if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
				return nil, err
			}
		}
	}
	sort.Strings(shards)
	return shards, os.WriteFile(filepath.Join(tmp, "model.safetensors.index.json"), b, 0o644)
}

// header reads a shard's first 8 + n bytes (its length and JSON header),
// checks them as the local reader does, and returns them with the file's
// size on the hub. left is what all headers may still take.
func (f *fetcher) header(ctx context.Context, shard string, left *int64) ([]byte, int64, error) {
	first, total, err := f.rangeGet(ctx, shard, 0, 8)
	if err != nil {
		return nil, 0, err
	}
	if len(first) < 8 {
		return nil, 0, fmt.Errorf("%s: the file has %d bytes, too few for a safetensors header", shard, total)
	}
	n := binary.LittleEndian.Uint64(first)
	if n < 2 || n > vram.MaxSafetensorsHead || int64(n) > *left {
		return nil, 0, fmt.Errorf("%s: header length %d is out of range (at most %d, and %d for all headers left)", shard, n, int64(vram.MaxSafetensorsHead), *left)
	}
	*left -= int64(n)
	body, total2, err := f.rangeGet(ctx, shard, 8, int64(n))
	if err != nil {
		return nil, 0, err
	}
	if total2 != total || int64(len(body)) != int64(n) {
		return nil, 0, fmt.Errorf("%s: the file (%d bytes, then %d) ends before its %d-byte header does", shard, total, total2, n)
	}
	head := append(first, body...)
	if _, err := vram.ReadSafetensors(bytes.NewReader(head)); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", shard, err)
	}
	return head, total, nil
}

// get reads a whole small file (config.json, the index).
func (f *fetcher) get(ctx context.Context, name string, limit int64) ([]byte, error) {
	resp, err := f.do(ctx, name, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusErr(resp, name, f.opt.Token != "")
	}
	b, err := fileio.ReadAtMost(resp.Body, name, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
		return nil, fmt.Errorf("%s: truncated: %d of the %d bytes the hub announced", name, len(b), resp.ContentLength)
	}
	return b, nil
}

// rangeGet reads bytes [off, off+n) of a file — fewer where the file ends
// first, as servers clamp a range to the file — and the file's size: from
// a 206's Content-Range, or a 200's Content-Length where the server
// ignores ranges (only the bytes asked for are read before the body is
// closed).
func (f *fetcher) rangeGet(ctx context.Context, name string, off, n int64) ([]byte, int64, error) {
	resp, err := f.do(ctx, name, fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var total int64
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, end, size, err := contentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off || end < start || end > off+n-1 || end >= size || end < off+n-1 && end != size-1 {
			return nil, 0, fmt.Errorf("%s: Content-Range %q does not answer bytes %d-%d", name, resp.Header.Get("Content-Range"), off, off+n-1)
		}
		total, n = size, end-start+1
	case http.StatusOK:
		if resp.ContentLength < 0 {
			return nil, 0, fmt.Errorf("%s: the server neither serves ranges nor says the file's size", name)
		}
		total = resp.ContentLength
		if off >= total {
			return nil, 0, fmt.Errorf("%s: byte %d lies past the file's %d bytes", name, off, total)
		}
		n = min(n, total-off)
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			return nil, 0, fmt.Errorf("%s: truncated before byte %d", name, off)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return nil, 0, fmt.Errorf("%s: the file ends before byte %d", name, off)
	default:
		return nil, 0, statusErr(resp, name, f.opt.Token != "")
	}
	body := &counter{r: resp.Body}
	buf, err := fileio.ReadN(body, n) // as the bytes arrive: a claimed length costs nothing until served
	if err != nil {
		return nil, 0, fmt.Errorf("%s: truncated: %d of %d bytes", name, body.n, n)
	}
	return buf, total, nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// contentRange reads "bytes START-END/SIZE".
func contentRange(h string) (start, end, size int64, err error) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	rng, total, ok2 := strings.Cut(spec, "/")
	from, to, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, 0, fmt.Errorf("malformed")
	}
	if start, err = strconv.ParseInt(from, 10, 64); err != nil {
		return 0, 0, 0, err
	}
	if end, err = strconv.ParseInt(to, 10, 64); err != nil {
		return 0, 0, 0, err
	}
	if size, err = strconv.ParseInt(total, 10, 64); err != nil || size < 0 {
		return 0, 0, 0, fmt.Errorf("no size")
	}
	return start, end, size, nil
}

func (f *fetcher) do(ctx context.Context, name, rng string) (*http.Response, error) {
	u := f.base + escapePath(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	if f.opt.Token != "" {
		req.Header.Set("Authorization", "Bearer "+f.opt.Token)
	}
	req.Header.Set("User-Agent", "vramlab")
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: the hub did not answer in time (%v)", name, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %v (offline? a model read once is kept in the cache; HF_HUB_OFFLINE=1 reads only it)", name, err)
	}
	return resp, nil
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// statusErr says what a refusal means for the user.
func statusErr(resp *http.Response, name string, token bool) error {
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		if token {
			return fmt.Errorf("%s: %s: HF_TOKEN has no access to this repository (accept its licence on the hub, or use a token that can read it)", name, resp.Status)
		}
		return fmt.Errorf("%s: %s: the repository is gated or private; set HF_TOKEN to a token that can read it", name, resp.Status)
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w: no such repository, revision or file", name, errNotFound)
	case http.StatusTooManyRequests:
		wait := resp.Header.Get("Retry-After")
		if wait == "" {
			wait = "a while"
		} else {
			wait += " s"
		}
		return fmt.Errorf("%s: %s: the hub is rate-limiting this address; retry after %s", name, resp.Status, wait)
	}
	return fmt.Errorf("%s: the hub answered %s", name, resp.Status)
}
