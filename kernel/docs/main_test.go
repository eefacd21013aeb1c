package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

const root = "../.."

// TestReadmeFrontDoor: README.md is a front door, not the manual: at most
// 300 lines, the two commands, and a link to each doc the reference
// material lives in.
func TestReadmeFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; it stays within 300 (reference material goes beside its code)", n)
	}
	for _, want := range []string{"make lab", "make test", "notebooks/README.md", "vram/README.md", "examples/README.md",
		"examples/validate/README.md", "kernel/README.md", "README.zh-CN.md"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not mention %s", want)
		}
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link in the committed Markdown files names
// a file that exists, and every #anchor a heading of the file it points at.
func TestDocLinks(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	docs := strings.Fields(string(out))
	if len(docs) < 6 {
		t.Fatalf("found %d Markdown files: %v", len(docs), docs)
	}
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, filepath.Dir(doc), file)
			if file == "" {
				path = filepath.Join(root, doc)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
				continue
			}
			if anchor != "" && !hasAnchor(t, path, anchor) {
				t.Errorf("%s links to %s: no heading there has the anchor #%s", doc, target, anchor)
			}
		}
	}
}

// hasAnchor reports whether a Markdown file has a heading whose GitHub
// anchor is anchor.
func hasAnchor(t *testing.T, path, anchor string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") && slug(h) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores left out.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Serving with vLLM":                    "serving-with-vllm",
		"TGI, prefix caching, draft models":    "tgi-prefix-caching-draft-models",
		"Post-training: GRPO, RLOO and DPO":    "post-training-grpo-rloo-and-dpo",
		"FSDP2 against FSDPMemTracker":         "fsdp2-against-fsdpmemtracker",
		"`make report`, offline":               "make-report-offline",
		"继续阅读（英文）":                             "继续阅读英文",
		"Words each framework's plans accept ": "words-each-frameworks-plans-accept",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestReplaceSection: a section's body is replaced, the lines around it
// kept; a missing BEGIN or END line is an error that names it.
func TestReplaceSection(t *testing.T) {
	doc := "intro\n<!-- BEGIN go run ./kernel/docs speed -->\nold\ntable\n<!-- END -->\nafter\n"
	got, err := replaceSection([]byte(doc), "go run ./kernel/docs speed", "new\n")
	if err != nil || string(got) != "intro\n<!-- BEGIN go run ./kernel/docs speed -->\nnew\n<!-- END -->\nafter\n" {
		t.Errorf("replaced: %q, %v", got, err)
	}
	for _, bad := range []string{"intro\n", "<!-- BEGIN go run ./kernel/docs speed -->\nold\n", "<!-- BEGIN go run ./kernel/docs speed -->"} {
		if _, err := replaceSection([]byte(bad), "go run ./kernel/docs speed", "x"); err == nil || !strings.Contains(err.Error(), "go run ./kernel/docs speed") {
			t.Errorf("%q: want an error naming the section, got %v", bad, err)
		}
	}
}

// TestSpeedTable: benchmark output becomes a row per benchmark with the
// least and most of its runs, described by its doc comment; output
// without results is an error.
func TestSpeedTable(t *testing.T) {
	out := `goos: linux
pkg: github.com/vramlab/vramlab/vram
BenchmarkEstimateLlama70B-2   	   10000	    112620 ns/op	   73088 B/op	     181 allocs/op
BenchmarkEstimateLlama70B-2   	   11506	    114795 ns/op	   73088 B/op	     181 allocs/op
BenchmarkMaxMicroBatch/allocated-2 	 2000	   555000 ns/op	  468992 B/op	    1760 allocs/op
BenchmarkSweep10k-2           	       2	 698985514 ns/op	526041152 B/op	 1732500 allocs/op
PASS
`
	table, err := speedTable([]byte(out), root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `EstimateLlama70B` | one estimate of a Llama-3.1-70B training plan",
		"| 113–115 µs | 71.4 KiB | 181 |",
		"| `MaxMicroBatch/allocated` | the largest micro-batch of a Llama-3-8B LoRA plan on an A100 80GB, judged on each measure: allocated. | 555 µs | 458 KiB | 1,760 |",
		"| 699 ms | 502 MiB | 1,732,500 |",
		"The least and the most of 1–2 runs each",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if _, err := speedTable([]byte("PASS\n"), root); err == nil {
		t.Error("output without benchmarks should be an error")
	}
}
