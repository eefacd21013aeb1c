// Command docs writes the docs' tables of measured numbers from the
// measurements themselves, so that none is edited by hand (`make docs` runs
// it with the tests that write the others):
//
//	go test ./vram ./vram/gpu -run '^$' -bench . -benchmem -count 3 > bench.txt
//	go run ./kernel/docs speed bench.txt vram/README.md   # the speed table, from the benchmarks
//	go run ./kernel/docs sizes kernel/README.md           # what charts and a report weigh
//
// A table lives between a line `<!-- BEGIN <command> -->` and the next
// `<!-- END -->`; the command named there is the one that writes it.
package main

import (
	"bytes"
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "speed":
		out, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		table, err := speedTable(out, ".")
		if err != nil {
			return err
		}
		return splice(args[2], "go run ./kernel/docs speed", table)
	case len(args) == 2 && args[0] == "sizes":
		table, err := sizeTable(".")
		if err != nil {
			return err
		}
		return splice(args[1], "go run ./kernel/docs sizes", table)
	}
	return fmt.Errorf("usage: docs speed BENCH-OUTPUT FILE.md | docs sizes FILE.md")
}

// splice replaces the body of the section that begins with the line
// `<!-- BEGIN <command>` in file.
func splice(file, command, body string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	updated, err := replaceSection(b, command, body)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, updated, 0o644)
}

// replaceSection is splice on bytes: the lines after the BEGIN line up to
// the END line become body.
func replaceSection(doc []byte, command, body string) ([]byte, error) {
	begin := []byte("<!-- BEGIN " + command)
	i := bytes.Index(doc, begin)
	if i < 0 {
		return nil, fmt.Errorf("no section %q", "<!-- BEGIN "+command+" … -->")
	}
	start := i + bytes.IndexByte(doc[i:], '\n') + 1
	end := bytes.Index(doc[start:], []byte("<!-- END -->"))
	if start <= i || end < 0 {
		return nil, fmt.Errorf("section %q has no <!-- END --> line", command)
	}
	var out bytes.Buffer
	out.Write(doc[:start])
	out.WriteString(body)
	out.Write(doc[start+end:])
	return out.Bytes(), nil
}
