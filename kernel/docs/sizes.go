package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/charts"
	"github.com/vramlab/vramlab/vram"
)

// The report whose size the table gives: `make report PLAN=<this>` writes it.
const reportPlan = "examples/plans/llama3-8b-lora.json"

// sizeTable weighs what a notebook or a report carries: the ECharts loader,
// one chart of each common kind, and the exported report of reportPlan
// (which must have been made first).
func sizeTable(root string) (string, error) {
	full, err := vram.ReadPlan(filepath.Join(root, "examples/plans/llama2-7b-full-fp32.json"))
	if err != nil {
		return "", err
	}
	est, err := full.Training.Estimate()
	if err != nil {
		return "", err
	}
	gpt2 := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 1024, MicroBatch: 8, Precision: "bf16"}
	tl, err := gpt2.Timeline()
	if err != nil {
		return "", err
	}
	report, err := reportSizes(root)
	if err != nil {
		return "", err
	}
	rows := [][2]string{
		{"ECharts loader (once per notebook or report)", kib(len(charts.LoaderHTML()))},
		{fmt.Sprintf("one breakdown chart (Llama-2-7B in fp32, %d categories)", categories(est.Peak)), kib(len(charts.HTML(charts.Breakdown(est.Peak, "peak"))))},
		{"one timeline chart (two iterations of GPT-2)", kib(len(charts.HTML(charts.Timeline(tl, 0))))},
		{"exported report for `" + strings.TrimSuffix(filepath.Base(reportPlan), ".json") + "`", report},
	}
	var b strings.Builder
	b.WriteString("| what | size |\n|---|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
	}
	return b.String(), nil
}

// reportSizes gives the report's HTML and PDF sizes and the PDF's pages
// (pdfinfo, from poppler-utils, which make test installs).
func reportSizes(root string) (string, error) {
	name := strings.TrimSuffix(filepath.Base(reportPlan), ".json")
	base := filepath.Join(root, ".artifacts/reports", name, name)
	html, err := os.Stat(base + ".html")
	if err != nil {
		return "", fmt.Errorf("%v: run make report PLAN=%s first", err, reportPlan)
	}
	pdf, err := os.Stat(base + ".pdf")
	if err != nil {
		return "", fmt.Errorf("%v: run make report PLAN=%s first", err, reportPlan)
	}
	out, err := exec.Command("pdfinfo", base+".pdf").Output()
	if err != nil {
		return "", fmt.Errorf("pdfinfo %s.pdf: %v", base, err)
	}
	pages := "?"
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Pages:" {
			pages = f[1]
		}
	}
	return fmt.Sprintf("HTML %s, PDF %s (%s A4 pages)", kib(int(html.Size())), kib(int(pdf.Size())), pages), nil
}

func categories(b vram.Breakdown) int {
	return len(b.Items())
}

func kib(n int) string {
	s, _, unit := size(float64(n), 0)
	return s + unit
}
