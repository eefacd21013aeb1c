// Package hub reads a Hugging Face hub model's config.json and
// safetensors headers — never its weights — by HTTP range requests, into
// a cache the engine then reads as a checkpoint folder. Importing it sets
// vram.HubResolver, so a plan's model may be "hf://org/name[@revision]":
//
//	import _ "github.com/vramlab/vramlab/vram/hub"
//
//	p, err := vram.ParsePlan([]byte(`{"model": "hf://Qwen/Qwen3-8B", "train": {…}}`), ".")
//	dir, err := hub.Resolve(ctx, "hf://Qwen/Qwen3-8B", hub.FromEnv()) // the folder itself
//
// What is sent where: GET requests to HF_ENDPOINT (https://huggingface.co
// unless set) for {repo}/resolve/{revision}/config.json, the safetensors
// index and each shard's first bytes (Range: bytes=0-7, then the header),
// with HF_TOKEN as a bearer token to that host only (Go's client drops it
// on a redirect to another host, as the hub's CDN redirects are); nothing
// else leaves the machine. The cache is HF_HOME/vramlab (HF_HOME defaults
// to ~/.cache/huggingface); a model read once is read again from it with
// no network, and HF_HUB_OFFLINE=1 never touches the network.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/vramlab/vramlab/vram"
)

func init() {
	vram.HubResolver = func(ref string) (string, error) {
		opt := FromEnv()
		ctx, cancel := context.WithTimeout(context.Background(), opt.Timeout)
		defer cancel()
		return Resolve(ctx, ref, opt)
	}
}

// Options say where the hub is and where its files are kept.
type Options struct {
	Endpoint string        // the hub's base URL (HF_ENDPOINT)
	Token    string        // a bearer token for gated and private models (HF_TOKEN)
	CacheDir string        // where headers are kept (HF_HOME/vramlab)
	Offline  bool          // read only the cache (HF_HUB_OFFLINE=1)
	Timeout  time.Duration // the whole resolve's deadline (default 60 s)
	Client   *http.Client  // nil: a client with the Timeout per request
}

// DefaultEndpoint is the hub's address when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// FromEnv reads the options as huggingface_hub's environment names them
// (huggingface_hub/constants.py: HF_ENDPOINT, HF_HOME, HF_TOKEN,
// HF_HUB_OFFLINE; the token file HF_HOME/token that `hf auth login`
// writes).
func FromEnv() Options {
	o := Options{Endpoint: os.Getenv("HF_ENDPOINT"), Token: os.Getenv("HF_TOKEN"), Timeout: 60 * time.Second}
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	home := os.Getenv("HF_HOME")
	if home == "" {
		if c := os.Getenv("XDG_CACHE_HOME"); c != "" {
			home = filepath.Join(c, "huggingface")
		} else if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".cache", "huggingface")
		}
	}
	o.CacheDir = filepath.Join(home, "vramlab")
	if o.Token == "" {
		if b, err := os.ReadFile(filepath.Join(home, "token")); err == nil && len(b) < 4096 {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		o.Offline = true
	}
	return o
}

// Ref is a parsed hf:// id.
type Ref struct {
	Repo     string // org/name
	Revision string // a branch, tag or commit (main)
}

var (
	repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	revName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
)

// ParseRef reads hf://org/name[@revision].
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, "hf://")
	if !ok {
		return Ref{}, fmt.Errorf("%q: a hub model is hf://org/name[@revision]", s)
	}
	repo, rev, _ := strings.Cut(rest, "@")
	if rev == "" {
		rev = "main"
	}
	if !repoName.MatchString(repo) || strings.Contains(repo, "..") || strings.Contains(repo, "--") {
		// The hub refuses -- and .. in a repository's id (huggingface_hub's
		// validate_repo_id), and the cache's folder models--org--name
		// relies on it: hf://a--b/c and hf://a/b--c would share one.
		return Ref{}, fmt.Errorf("%q: the repository must be org/name (letters, digits, . _ -; no -- or .., which the hub refuses too)", s)
	}
	if !revName.MatchString(rev) || strings.Contains(rev, "..") {
		return Ref{}, fmt.Errorf("%q: revision %q is not a branch, tag or commit name", s, rev)
	}
	return Ref{Repo: repo, Revision: rev}, nil
}

// folder is where ref's files are kept in the cache.
func (r Ref) folder(cache string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(r.Repo, "/", "--"), url.PathEscape(r.Revision))
}

// ErrOffline is returned when the cache lacks a model and the network may
// not be used.
var ErrOffline = errors.New("not in the cache, and HF_HUB_OFFLINE is set")

// Resolve brings ref's config.json and safetensors headers into the cache
// (unless they are there) and returns their folder.
func Resolve(ctx context.Context, ref string, opt Options) (string, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return "", err
	}
	if opt.CacheDir == "" {
		return "", fmt.Errorf("%s: no cache folder (set HF_HOME)", ref)
	}
	dir := r.folder(opt.CacheDir)
	if complete(dir) {
		return dir, nil
	}
	if opt.Offline {
		return "", fmt.Errorf("%s: %w (looked in %s; unset HF_HUB_OFFLINE to fetch its config.json and safetensors headers once, or give its config.json as {\"hf_config\": …} or its folder as {\"checkpoint\": …})", ref, ErrOffline, dir)
	}
	f := newFetcher(opt, r)
	if err := f.fetchAll(ctx, dir); err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	return dir, nil
}

// complete tells a cached folder the fetch finished (the manifest is
// written last).
func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, vram.HeadersManifest))
	return err == nil
}
