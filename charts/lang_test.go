package charts

import (
	"strings"
	"testing"

	"github.com/vramlab/vramlab/vram"
)

func TestDetectLang(t *testing.T) {
	for _, c := range []struct{ env, session, want string }{
		{"", "", "en"},
		{"", "01-who-eats-the-memory.ipynb", "en"},
		{"", "zh/01-who-eats-the-memory.ipynb", "zh"},
		{"", "/home/jovyan/vramlab/zh/20-what-if-playground.ipynb", "zh"},
		{"zh", "", "zh"},
		{"en", "zh/01.ipynb", "en"},
		{"", "notebooks/zhx/01.ipynb", "en"},
	} {
		if got := detectLang(c.env, c.session); got != c.want {
			t.Errorf("detectLang(%q, %q) = %q, want %q", c.env, c.session, got, c.want)
		}
	}
}

// withLang runs f with Lang set to l.
func withLang(l string, f func()) {
	old := Lang
	Lang = l
	defer func() { Lang = old }()
	f()
}

func TestChartsFollowTheLanguage(t *testing.T) {
	tr0 := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 512, MicroBatch: 2}
	est, err := tr0.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := tr0.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	var en, zhOut string
	build := func() string {
		return HTML(Breakdown(est.Peak, "Peak allocated memory per GPU")) + HTML(Timeline(tl, 80*vram.GiB))
	}
	withLang("en", func() { en = build() })
	withLang("zh", func() { zhOut = build() })
	for _, want := range []string{"每 GPU 的已分配显存峰值", "参数", "激活值", "合计 ", "训练步内的显存", "峰值 ", "第 2 次迭代", "前向 1", "类别"} {
		if !strings.Contains(zhOut, want) {
			t.Errorf("the Chinese charts lack %q", want)
		}
	}
	if !strings.Contains(zhOut, `"type":"value"`) || !strings.Contains(zhOut, `"type":"category"`) {
		t.Error("option settings were translated along with the text")
	}
	for _, gone := range []string{`"Peak allocated memory per GPU"`, `"activations"`, `>category<`} {
		if strings.Contains(zhOut, gone) {
			t.Errorf("the Chinese charts still say %s", gone)
		}
	}
	if !strings.Contains(en, `"activations"`) || strings.Contains(en, "激活值") {
		t.Error("the English charts changed")
	}
	// The tooltip functions survive translation untouched.
	if strings.Count(zhOut, "function(") != strings.Count(en, "function(") {
		t.Error("a tooltip function was lost in translation")
	}
}

func TestTranslationKeepsUserText(t *testing.T) {
	withLang("zh", func() {
		for _, s := range []string{"meta-llama/Llama-2-7b-hf", "my plan", "<img src=x onerror=alert(1)>", "__f__alert(1)__f__"} {
			if got := tr(s); got != s {
				t.Errorf("tr(%q) = %q: user text must pass through", s, got)
			}
		}
		if got := trWhere("iteration 2, backward, block 3 recompute"); got != "第 2 次迭代，反向，第 3 块 重算" {
			t.Errorf("trWhere: %q", got)
		}
	})
}

// TestTranslationLeavesUserLabels: labels, titles and names a caller gives
// stay theirs in a Chinese chart even when they equal a chart word
// ("other", "parameters"), while the chart's own words and the tutorials'
// titles are translated; no mark is left in what renders.
func TestTranslationLeavesUserLabels(t *testing.T) {
	est, err := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 128, MicroBatch: 1}.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	var out string
	withLang("zh", func() {
		out = HTML(Compare([]string{"other", "parameters"}, []vram.Breakdown{est.Peak, est.Peak}, 0)) +
			HTML(Breakdown(est.Peak, "total")) + HTML(Breakdown(est.Peak, "Live at the peak")) +
			HTML(GPUs([]GPU{{Name: "yes", Total: vram.GiB}}, "GPU memory now"))
	})
	for _, want := range []string{`"data":["other","parameters"]`, `<td style="padding:2px 8px">other</td>`, `"text":"total"`, `>total</caption>`,
		`"name":"参数"`, "峰值时刻存活的显存", "GPU 当前显存", `"data":["yes"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("the Chinese charts lack %s", want)
		}
	}
	for _, gone := range []string{`"data":["其他","参数"]`, `"text":"合计"`, `"data":["是"]`, userMark} {
		if strings.Contains(out, gone) {
			t.Errorf("the Chinese charts have %q", gone)
		}
	}
	c := Compare([]string{"other"}, []vram.Breakdown{est.Peak}, 0)
	withLang("en", func() { out = HTML(c) })
	if strings.Contains(out, userMark) || !strings.Contains(out, `"data":["other"]`) {
		t.Error("the English chart keeps a mark or loses the label")
	}
}

// TestDiffChartInChinese: the diff chart's own phrase around the two
// labels is translated, the labels stay the caller's (a tutorial's
// "your run" is translated as the tutorials' words are), and the
// categories are the chart's words.
func TestDiffChartInChinese(t *testing.T) {
	var out string
	withLang("zh", func() { out = HTML(Diff(exampleDiff(t, "your run", "other"), 3)) })
	for _, want := range []string{`"text":"other − 你的运行：已分配峰值处的差异"`, "你的运行：88.0 MiB（第 2 次迭代，反向）；other：65.1 MiB（第 1 次迭代，优化器步）", `"激活值"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the Chinese diff chart lacks %s", want)
		}
	}
	if strings.Contains(out, userMark) || strings.Contains(out, "at the allocated peak") {
		t.Error("the Chinese diff chart kept a mark or its English phrase")
	}
}

// TestElidedMicroStepsSaid: with eight micro-steps a timeline draws the
// first and the last of each iteration and says the others are left out,
// in English and in Chinese.
func TestElidedMicroStepsSaid(t *testing.T) {
	tr := vram.Training{Model: vram.MustPreset("gpt2"), SeqLen: 256, MicroBatch: 1, GradAccum: 8, Precision: "bf16", Optimizer: "adamw"}
	tl, err := tr.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	c := Timeline(tl, 0)
	if !strings.Contains(c.Option.Title.Subtitle, "micro-steps 2–7 of each iteration not drawn: each holds what micro-step 8 holds before the optimizer") {
		t.Errorf("subtitle %q", c.Option.Title.Subtitle)
	}
	defer func(l string) { Lang = l }(Lang)
	Lang = "zh"
	if h := HTML(c); !strings.Contains(h, `"subtext":"峰值 1.24 GiB，位于第 2 次迭代，反向，损失与输出；每次迭代的第 2–7 个微步未画出`) {
		t.Error("the Chinese timeline does not say which micro-steps it leaves out")
	}
	if strings.Contains(HTML(c), "hover") {
		t.Error("a chart that prints says hover")
	}
}
