package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

const module = "github.com/vramlab/vramlab"

// benchResult is one benchmark's runs: the least and most of each measure.
type benchResult struct {
	pkg, name          string
	nsMin, nsMax       float64
	bytesMin, bytesMax float64
	allocMin, allocMax float64
	runs               int
}

// speedTable turns `go test -bench . -benchmem` output into a table, a row
// per benchmark in the order they ran, each described by its own doc
// comment (read from the package's test files under root).
func speedTable(out []byte, root string) (string, error) {
	results, err := parseBench(out)
	if err != nil {
		return "", err
	}
	docs := map[string]map[string]string{}
	var b strings.Builder
	b.WriteString("| benchmark | what | time | memory | allocations |\n|---|---|---:|---:|---:|\n")
	for _, r := range results {
		if docs[r.pkg] == nil {
			if docs[r.pkg], err = benchDocs(filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(r.pkg, module), "/"))); err != nil {
				return "", err
			}
		}
		top, sub, _ := strings.Cut(r.name, "/")
		what := docs[r.pkg][top]
		if sub != "" {
			what = strings.TrimSuffix(what, ".") + ": " + strings.ReplaceAll(sub, "_", " ") + "."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.name, what,
			span(r.nsMin, r.nsMax, duration), span(r.bytesMin, r.bytesMax, size), span(r.allocMin, r.allocMax, count))
	}
	fmt.Fprintf(&b, "\n%s\n", runsNote(results))
	return b.String(), nil
}

// parseBench reads benchmark lines (`BenchmarkX-2  N  T ns/op  B B/op  A
// allocs/op`) under their `pkg:` line.
func parseBench(out []byte) ([]*benchResult, error) {
	var pkg string
	byName := map[string]*benchResult{}
	var order []*benchResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "pkg:" {
			pkg = f[1]
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		vals := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", sc.Text(), err)
			}
			vals[f[i+1]] = v
		}
		r := byName[pkg+"."+name]
		if r == nil {
			r = &benchResult{pkg: pkg, name: name, nsMin: vals["ns/op"], bytesMin: vals["B/op"], allocMin: vals["allocs/op"]}
			byName[pkg+"."+name] = r
			order = append(order, r)
		}
		r.runs++
		r.nsMin, r.nsMax = min(r.nsMin, vals["ns/op"]), max(r.nsMax, vals["ns/op"])
		r.bytesMin, r.bytesMax = min(r.bytesMin, vals["B/op"]), max(r.bytesMax, vals["B/op"])
		r.allocMin, r.allocMax = min(r.allocMin, vals["allocs/op"]), max(r.allocMax, vals["allocs/op"])
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no benchmark results (run go test -bench . -benchmem)")
	}
	return order, sc.Err()
}

// benchDocs reads the doc comment of every benchmark in dir's test files:
// name (without "Benchmark") → its first sentence, without the name.
func benchDocs(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no test files in %s", dir)
	}
	docs := map[string]string{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Benchmark") {
				continue
			}
			text := strings.Join(strings.Fields(fn.Doc.Text()), " ")
			text = strings.TrimPrefix(text, fn.Name.Name+":")
			if i := strings.Index(text, ". "); i >= 0 {
				text = text[:i+1]
			}
			docs[strings.TrimPrefix(fn.Name.Name, "Benchmark")] = strings.TrimSpace(text)
		}
	}
	return docs, nil
}

func runsNote(rs []*benchResult) string {
	lo, hi := rs[0].runs, rs[0].runs
	for _, r := range rs {
		lo, hi = min(lo, r.runs), max(hi, r.runs)
	}
	n := strconv.Itoa(lo)
	if hi != lo {
		n += "–" + strconv.Itoa(hi)
	}
	return "The least and the most of " + n + " runs each (`-count`)."
}

// span writes "a" or "a–b" in one unit, the unit of the larger.
func span(lo, hi float64, unit func(v, scale float64) (string, float64, string)) string {
	_, scale, name := unit(hi, 0)
	a, _, _ := unit(lo, scale)
	b, _, _ := unit(hi, scale)
	if a == b {
		return a + name
	}
	return a + "–" + b + name
}

// duration, size and count format v (in ns, bytes, a number) in the unit
// scale (0: the unit that suits v, the next from 1000 of one) with three
// significant digits.
func duration(v, scale float64) (string, float64, string) {
	return scaled(v, scale, []float64{1, 1e3, 1e6, 1e9}, []string{" ns", " µs", " ms", " s"})
}

func size(v, scale float64) (string, float64, string) {
	return scaled(v, scale, []float64{1, 1 << 10, 1 << 20, 1 << 30}, []string{" B", " KiB", " MiB", " GiB"})
}

// count groups a number's digits by thousands (1,732,500).
func count(v, _ float64) (string, float64, string) {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s, 1, ""
}

func scaled(v, scale float64, scales []float64, names []string) (string, float64, string) {
	i := 0
	if scale == 0 {
		for i+1 < len(scales) && v >= 1000*scales[i] {
			i++
		}
	} else {
		for i+1 < len(scales) && scales[i] != scale {
			i++
		}
	}
	x := v / scales[i]
	digits := 0
	switch {
	case x == 0:
	case x < 10:
		digits = 2
	case x < 100:
		digits = 1
	}
	return strconv.FormatFloat(x, 'f', digits, 64), scales[i], names[i]
}
