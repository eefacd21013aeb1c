package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

// verbRE is one fmt verb: flags, an explicit argument index, width,
// precision and the verb letter.
var verbRE = regexp.MustCompile(`%([-+# 0]*)(?:\[(\d+)\])?(\d*)(?:\.(\d+))?([a-zA-Z%])`)

// argVerbs maps each argument a format reads to its verb letter.
func argVerbs(f string) map[int]string {
	out, next := map[int]string{}, 1
	for _, m := range verbRE.FindAllStringSubmatch(f, -1) {
		if m[5] == "%" {
			continue
		}
		if m[2] != "" {
			next, _ = strconv.Atoi(m[2])
		}
		out[next] = m[5]
		next++
	}
	return out
}

// TestPrintCatalog: every Chinese format reads the same arguments with the
// same verbs as its English, and every text a tutorial prints through
// charts.Printf or Println is in the catalog.
func TestPrintCatalog(t *testing.T) {
	for en, zh := range zhPrint {
		e, z := argVerbs(en), argVerbs(zh)
		if len(e) != len(z) {
			t.Errorf("%q: %d arguments, its Chinese %d", en, len(e), len(z))
		}
		for i, v := range e {
			if z[i] != v {
				t.Errorf("%q: argument %d is %%%s, in Chinese %%%s", en, i, v, z[i])
			}
		}
		if !regexp.MustCompile(`\p{Han}`).MatchString(zh) {
			t.Errorf("%q: its Chinese %q has no Chinese", en, zh)
		}
	}
	files, _ := filepath.Glob("../notebooks/*.ipynb")
	lit := regexp.MustCompile(`charts\.(?:Printf|Println)\(\s*("(?:[^"\\]|\\.)*")`)
	words := regexp.MustCompile(`[A-Za-z]{2,}`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var nb struct {
			Cells []struct {
				Type   string   `json:"cell_type"`
				Source []string `json:"source"`
			} `json:"cells"`
		}
		if err := json.Unmarshal(data, &nb); err != nil {
			t.Fatal(err)
		}
		for _, c := range nb.Cells {
			if c.Type != "code" {
				continue
			}
			for _, m := range lit.FindAllStringSubmatch(strings.Join(c.Source, ""), -1) {
				s, err := strconv.Unquote(m[1])
				if err != nil {
					t.Fatalf("%s: %s: %v", f, m[1], err)
				}
				if _, ok := zhPrint[s]; !ok && words.MatchString(verbRE.ReplaceAllString(s, "")) {
					t.Errorf("%s prints %q, which has no Chinese in the catalog", filepath.Base(f), s)
				}
			}
		}
	}
}

// TestPrintInChinese: a Chinese tutorial prints the catalog's Chinese with
// the same numbers, the step's moments and a breakdown's categories too.
func TestPrintInChinese(t *testing.T) {
	defer func(l string) { Lang = l }(Lang)
	Lang = "zh"
	if got := sprintf("peak reserved %v\n", 3*vram.GiB); got != "保留峰值 3.0 GiB\n" {
		t.Errorf("%q", got)
	}
	if got := sprintf("%d trace entries on device %d, %d allocations; phases read %s\n", 10, 0, 4, "x"); got != "设备 0 上 10 条跟踪记录，4 次分配；阶段读取自x\n" {
		t.Errorf("%q", got)
	}
	a := localArgs([]any{"peak at:", "iteration 2, backward, block 3"}, true)
	if a[0] != "峰值位置：" || !strings.Contains(a[1].(string), "第 2 次迭代") {
		t.Errorf("%v", a)
	}
	b := localArgs([]any{vram.Breakdown{Parameters: vram.GiB, Gradients: vram.GiB}}, false)[0].(string)
	if !strings.HasPrefix(b, "参数") || !strings.Contains(b, "梯度") || !strings.Contains(b, "合计") || !strings.Contains(b, "1.00 GiB") {
		t.Errorf("%s", b)
	}
	Lang = "en"
	if got := sprintf("peak reserved %v\n", 3*vram.GiB); got != "peak reserved 3.0 GiB\n" {
		t.Errorf("%q", got)
	}
}
