package vram

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// docSection holds the section of a doc that begins with the line
// `<!-- BEGIN <command>` to body: the tables of measured numbers in the
// docs are written by the tests that measure them, never by hand. With
// -update (make docs) it rewrites the section.
func docSection(t *testing.T, file, command, body string) {
	t.Helper()
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin := []byte("<!-- BEGIN " + command)
	i := bytes.Index(doc, begin)
	if i < 0 {
		t.Fatalf("%s has no section %q", file, "<!-- BEGIN "+command+" -->")
	}
	start := i + bytes.IndexByte(doc[i:], '\n') + 1
	end := bytes.Index(doc[start:], []byte("<!-- END -->"))
	if start <= i || end < 0 {
		t.Fatalf("%s: section %q has no <!-- END --> line", file, command)
	}
	if string(doc[start:start+end]) == body {
		return
	}
	if !*updateGolden {
		t.Errorf("%s: the section %q is not this code's; make docs (or %s) rewrites it", file, command, command)
		return
	}
	updated := append(append(append([]byte{}, doc[:start]...), body...), doc[start+end:]...)
	if err := os.WriteFile(file, updated, 0o644); err != nil {
		t.Fatal(err)
	}
}

const familiesDoc = "README.md"

// TestFamiliesTable: vram/README.md's families table has a row for every
// family, each with its number of presets as the catalog has them and its
// file's lines of Go (comments and blank lines left out); what each row
// says the family models is prose and stays as written.
func TestFamiliesTable(t *testing.T) {
	const command = "go test ./vram -run TestFamiliesTable -update"
	doc, err := os.ReadFile(familiesDoc)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, n := range Presets() {
		m := MustPreset(n)
		count[m.Family]++
		if m.Vision != nil && m.Vision.Family != m.Family {
			count[m.Vision.Family]++
		}
	}
	var b strings.Builder
	b.WriteString("| family | presets | what the engine models beyond a Llama-style block | traced | lines |\n|---|---:|---|:---:|---:|\n")
	seen := map[string]bool{}
	for _, row := range familyRows(doc) {
		name := strings.Trim(row[0], "`")
		f := lookupFamily(name)
		if f == nil {
			t.Errorf("%s's families table has a row for %q, which is not a family", familiesDoc, name)
			continue
		}
		seen[name] = true
		presets := strconv.Itoa(count[name])
		if f.towerOnly {
			presets += " (a tower only)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %d |\n", name, presets, row[2], row[3], goLines(t, "family_"+name+".go"))
	}
	for _, name := range Families() {
		if !seen[name] {
			t.Errorf("%s's families table has no row for %s (add one with what it models; -update fills the numbers)", familiesDoc, name)
		}
	}
	docSection(t, familiesDoc, command, b.String())
}

// familyRows reads the families table's rows (their cells, trimmed) from
// the generated section.
func familyRows(doc []byte) [][]string {
	var rows [][]string
	_, section, _ := bytes.Cut(doc, []byte("<!-- BEGIN go test ./vram -run TestFamiliesTable"))
	section, _, _ = bytes.Cut(section, []byte("<!-- END -->"))
	sc := bufio.NewScanner(bytes.NewReader(section))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		// A cell may hold an escaped bar (`q\|k\|v`): split on the others.
		cells := strings.Split(strings.ReplaceAll(strings.Trim(line, "|"), `\|`, "\x00"), "|")
		if len(cells) != 5 {
			continue
		}
		for i := range cells {
			cells[i] = strings.ReplaceAll(strings.TrimSpace(cells[i]), "\x00", `\|`)
		}
		rows = append(rows, cells)
	}
	return rows
}

// goLines counts a Go file's lines that are neither blank nor comments.
func goLines(t *testing.T, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "//") {
			n++
		}
	}
	return n
}

// TestReadmeCounts: the front door's counts of families and catalog
// models are the package's.
func TestReadmeCounts(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for what, n := range map[string]int{"model families": len(Families()), "catalog models": len(Presets())} {
		if want := fmt.Sprintf("%d %s", n, what); !strings.Contains(string(b), want) {
			t.Errorf("README.md does not say %q (the package has %d %s)", want, n, what)
		}
	}
}
