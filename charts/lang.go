package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Lang is the language of chart titles, labels and fallback tables: "en"
// or "zh". Its default follows the notebook: $VRAMLAB_LANG when set, else
// "zh" for a notebook in a zh/ folder (Jupyter Server names the notebook of
// a kernel's session in JPY_SESSION_NAME), else "en". Code cells stay the
// same in every language; only what the charts say changes.
var Lang = detectLang(os.Getenv("VRAMLAB_LANG"), os.Getenv("JPY_SESSION_NAME"))

func detectLang(env, session string) string {
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "zh", "zh-cn", "zh_cn", "chinese":
		return "zh"
	case "en", "english":
		return "en"
	}
	s := "/" + filepath.ToSlash(session)
	if strings.Contains(s, "/zh/") {
		return "zh"
	}
	return "en"
}

// tr is s in Lang: an exact entry of the catalog, else a pattern (a value
// inside a fixed phrase: "total 39.98 GiB"), else s unchanged. Text a
// caller gave (marked by user: a title, a label, a name) is looked up among
// the titles and labels the tutorials give (zhTitles and the title
// patterns) and never among the chart's own words, so a label "other" stays
// "other"; its mark is removed either way.
func tr(s string) string {
	mine := strings.HasPrefix(s, userMark)
	if Lang != "zh" || s == "" {
		return unmark(s)
	}
	if mine {
		s = s[len(userMark):]
	} else if t, ok := zhWords[s]; ok {
		return t
	}
	if t, ok := zhTitles[unmark(s)]; ok {
		return t
	}
	for _, p := range zhPatterns {
		if mine && !p.title {
			continue
		}
		if m := p.re.FindStringSubmatch(s); m != nil {
			return unmark(p.to(m))
		}
	}
	return unmark(s)
}

// mine translates a caller's label caught inside one of the charts' own
// phrases as a caller's text: only as a title or label the tutorials give.
func mine(s string) string { return orSame(zhTitles[s], s) }

// trWhere translates the engine's description of a moment of the step
// ("iteration 2, backward, block 3"); parts it does not know stay as they are.
func trWhere(s string) string {
	if Lang != "zh" {
		return s
	}
	m := whereRE.FindStringSubmatch(s)
	if m == nil {
		return s
	}
	out := "第 " + m[1] + " 次迭代，" + orSame(phaseZh[m[2]], m[2])
	if m[3] != "" {
		rest := m[3]
		if b := blockRE.FindStringSubmatch(rest); b != nil {
			rest = "第 " + b[1] + " 块" + b[2]
		}
		out += "，" + momentZh.Replace(rest)
	}
	return out
}

// momentZh names the moments of the step in Chinese.
var momentZh = strings.NewReplacer("loss and output", "损失与输出", "recompute", "重算", "optimizer step", "优化器步", "output and loss", "输出与损失",
	"root reduce-scatter", "根模块 reduce-scatter", "pipeline reduce-scatter", "流水线 reduce-scatter", "output reduce-scatter", "输出层 reduce-scatter",
	"encoder-decoder bridge", "编码器-解码器交接", "projector and vision tower", "投影层与视觉塔", "embedding", "嵌入层", "unshard", "取回分片")

var (
	whereRE = regexp.MustCompile(`^iteration (\d+), ([a-z]+)(?:, (.+))?$`)
	blockRE = regexp.MustCompile(`^block (\d+)(.*)$`)
	phaseZh = map[string]string{"forward": "前向", "backward": "反向", "optimizer": "优化器步", "loss": "损失", "setup": "准备", "load": "加载"}
)

func orSame(t, s string) string {
	if t == "" {
		return s
	}
	return t
}

// localize translates what a chart shows, in one place for every kind:
// the option's texts (titles, series and legend names, axis names, data
// names, labels) and the fallback table. Functions (tooltips) are left as
// they are; the series names they print are translated with the series.
func localize(c Chart) (Chart, error) {
	if Lang != "zh" {
		c.Title = unmark(c.Title)
		c.Table = Table{Columns: trAll(c.Table.Columns), Rows: trRows(c.Table.Rows)}
		return c, nil
	}
	c.Title = tr(c.Title)
	c.Table = Table{Columns: trAll(c.Table.Columns), Rows: trRows(c.Table.Rows)}
	b, err := json.Marshal(c.Option)
	if err != nil {
		return c, err
	}
	var tree map[string]any
	if err := json.Unmarshal(b, &tree); err != nil {
		return c, err
	}
	c.localized = trTree(tree, "").(map[string]any)
	return c, nil
}

func trAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = tr(s)
	}
	return out
}

func trRows(rows [][]string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = trAll(r)
	}
	return out
}

// trTree translates the display strings of a decoded option: those under
// keys that hold text a reader sees (titles, names, labels, axis and legend
// data), never settings ("type": "value") or functions (tooltips).
func trTree(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = trTree(e, k)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = trTree(e, key) // elements of "data" are display text
		}
		return x
	case string:
		if strings.HasPrefix(x, "__f__") || !displayKeys[key] {
			return x
		}
		return tr(x)
	}
	return v
}

// displayKeys are the ECharts option keys whose strings are shown as text.
var displayKeys = map[string]bool{"text": true, "subtext": true, "name": true, "data": true, "label": true,
	"formatter": true, "xAxis": true, "source": true, "target": true}

type zhPattern struct {
	re    *regexp.Regexp
	to    func(m []string) string
	title bool // also for a caller's title (one of the tutorials')
}

// zhWords is the chart vocabulary in Chinese: the words the charts
// themselves write (categories, columns, legend entries).
var zhWords = map[string]string{
	// categories and their parts
	"kv cache": "KV 缓存", "parameters": "参数", "gradients": "梯度", "optimizer states": "优化器状态", "activations": "激活值",
	"temporaries": "临时缓冲", "other": "其他", "inputs": "输入", "updated parameters": "更新后的参数",
	"share": "占比", "total": "合计", "per GPU": "每 GPU", "capacity": "容量",
	"used": "已用", "free": "空闲", "device used": "设备已用", "process used": "进程已用",
	"real allocated": "实测已分配", "predicted allocated": "预测已分配", "real reserved": "实测保留", "predicted reserved": "预测保留",
	"does not fit": "放不下", "< 5 GiB free": "空余 < 5 GiB", "5–20 GiB": "空余 5–20 GiB", "> 20 GiB": "空余 > 20 GiB",
	"yes": "是", "no": "否", "invalid": "无效", "this plan": "当前计划", "peak": "峰值", "predicted": "预测",
	// table columns
	"category": "类别", "size": "大小", "plan": "计划", "iteration": "迭代", "phase": "阶段", "where": "位置",
	"fits": "放得下", "peak at": "峰值位置", "from": "从", "to": "到", "bytes": "字节", "part": "部分",
	"GPU": "GPU", "time": "时间", "setting": "设置", "value": "值",
	"real allocated (max)": "实测已分配（最大）", "predicted allocated (max)": "预测已分配（最大）",
	"real reserved (max)": "实测保留（最大）", "predicted reserved (max)": "预测保留（最大）",
	"embedding": "嵌入层", "head": "输出层",
	// a post-training step's holders and phases (Phases)
	"policy and optimizer": "策略模型与优化器", "reference model": "参考模型", "working memory": "工作内存",
	"PyTorch's cache": "PyTorch 缓存", "rollout engine": "rollout 推理引擎", "CUDA contexts and NCCL": "CUDA 上下文与 NCCL",
	"device": "设备", "host": "主机", "generation": "生成", "weight sync": "权重同步", "→ weight sync": "→ 权重同步",
	"old log-probs": "旧策略对数概率", "reference log-probs": "参考模型对数概率", "actor update": "actor 更新",
	"precompute reference log-probs (before training)": "预先计算参考对数概率（训练前）",
	// the allocator chart (Allocator)
	"allocated": "已分配", "cached but free": "已缓存但空闲", "phase end": "阶段末", "reserved": "已保留",
	"load": "加载",
	// what a GPU shows in use (DeviceUsed)
	"tensors at the peak": "峰值时的张量", "GEMM workspace": "GEMM 工作区", "CUDA context": "CUDA 上下文", "NCCL": "NCCL",
	"symmetric memory": "对称内存", "GPU memory": "GPU 显存",
	// the layout search (Search)
	"fastest": "最快", "limit": "上限", "layout": "布局", "rank": "排名", "tokens/s bound": "tokens/s 上界",
}

// zhTitles are the charts' default titles and the titles and labels the
// tutorials give their charts (their code is the same in both languages).
var zhTitles = map[string]string{
	// default titles and axis names
	"Memory over the training step":                          "训练步内的显存",
	"Peak allocated memory per GPU, by plan":                 "各方案每 GPU 的已分配显存峰值",
	"Peak allocated memory per GPU":                          "每 GPU 的已分配显存峰值",
	"Your run beside the prediction":                         "你的运行与预测对照",
	"Device memory over time (NVML)":                         "设备显存随时间变化（NVML）",
	"Device memory per GPU, phase by phase":                  "每 GPU 的设备显存：逐阶段",
	"Allocated and reserved memory at the end of each phase": "各阶段末的已分配与已保留显存",
	"the step's allocations and frees, in order":             "训练步中按顺序的分配与释放",
	"Layouts that fit: memory against speed":                 "放得下的布局：显存与速度",
	"What each GPU shows in use, inside and outside PyTorch": "每块 GPU 显示的已用显存：PyTorch 之内与之外",
	// the tutorials' chart titles
	"Llama-2-7B, bf16 AdamW: live at the peak":                          "Llama-2-7B，bf16 AdamW：峰值时刻存活的显存",
	"Llama-2-7B: peak per GPU in fp32 and in pure bf16":                 "Llama-2-7B：fp32 与纯 bf16 下每 GPU 的峰值",
	"the dashed line: what an A100 80GB leaves after its CUDA context":  "虚线：A100 80GB 扣除 CUDA 上下文后剩下的显存",
	"the dashed line: what an H100 80GB leaves after its CUDA context":  "虚线：H100 80GB 扣除 CUDA 上下文后剩下的显存",
	"Activations held at their largest, by attention and checkpointing": "激活值的最大占用：按注意力实现与检查点方式",
	"A training step and a no_grad forward: peak per GPU":               "一个训练步与一次 no_grad 前向：每 GPU 的峰值",
	"Model states per GPU by optimizer and precision":                   "每 GPU 的模型状态：按优化器与精度",
	"parameters, gradients and optimizer states; no activations":        "参数、梯度与优化器状态；不含激活值",
	"Llama-2-7B, fp32 AdamW: how memory flows in a step":                "Llama-2-7B，fp32 AdamW：一个训练步中显存的流向",
	"Llama-2-7B, fp32 AdamW: memory by part of the model":               "Llama-2-7B，fp32 AdamW：模型各部分的显存",
	"The rule of thumb beside the precise peak":                         "经验公式与精确峰值对照",
	"Peak per GPU on 2 GPUs, by ZeRO stage":                             "2 块 GPU 上每 GPU 的峰值：按 ZeRO 阶段",
	"A model of 2026 on one H100":                                       "一张 H100 上的 2026 年模型",
	"GLM-4.7-Flash, LoRA r16":                                           "GLM-4.7-Flash，LoRA r16",
	"Allocated memory at each phase of two iterations":                  "两次迭代中各阶段的已分配显存",
	"GPU memory now":                                                     "GPU 当前显存",
	"Peak per GPU by parallel layout":                                    "每 GPU 的峰值：按并行布局",
	"Inference memory by weight format, as released":                     "推理显存：按发布的权重格式",
	"Serving memory by concurrent sequences (6,144 + 2,048 tokens each)": "推理服务显存：按并发序列数（每条 6,144 + 2,048 个 token）",
	"training step":                                                      "训练步", "no_grad forward": "no_grad 前向", "rule of thumb": "经验公式", "precise peak": "精确峰值",
	"Live at the peak": "峰值时刻存活的显存", "Where your run holds more than predicted": "你的运行比预测多占的地方",
	"your run": "你的运行", "prediction": "预测", "difference": "差值",
}

var zhPatterns = []zhPattern{
	{regexp.MustCompile(`^peak (\S+ \S+) at (.+); capacity (.+), off the scale$`), func(m []string) string {
		return "峰值 " + m[1] + "，位于" + trWhere(m[2]) + "；容量 " + m[3] + "，超出坐标范围"
	}, false},
	{regexp.MustCompile(`^capacity (.+), off the scale$`), func(m []string) string { return "容量 " + m[1] + "，超出坐标范围" }, false},
	{regexp.MustCompile(`^device-used peak (.+?); predicted (.+?)(?:; capacity (.+), off the scale)?$`), func(m []string) string {
		out := "设备已用峰值 " + m[1] + "；预测 " + m[2]
		if m[3] != "" {
			out += "；容量 " + m[3] + "，超出坐标范围"
		}
		return out
	}, false},
	{regexp.MustCompile(`^(forward|backward|optimizer|loss) (\d+) \((.+)\)$`), func(m []string) string {
		return phaseZh[m[1]] + " " + m[2] + "（" + momentZh.Replace(m[3]) + "）"
	}, false},
	{regexp.MustCompile(`^total (.+)$`), func(m []string) string { return "合计 " + m[1] }, false},
	{regexp.MustCompile(`^capacity (.+)$`), func(m []string) string { return "容量 " + m[1] }, false},
	{regexp.MustCompile(`^predicted (\d.+)$`), func(m []string) string { return "预测 " + m[1] }, false},
	{regexp.MustCompile(`^peak (\S+ \S+) at (.+?); micro-steps? (\d+(?:–\d+)?) of each iteration not drawn: (?:each holds|it holds) what micro-step (\d+) holds before the optimizer$`), func(m []string) string {
		return "峰值 " + m[1] + "，位于" + trWhere(m[2]) + "；每次迭代的第 " + m[3] + " 个微步未画出：与第 " + m[4] + " 个微步在优化器步之前所持有的相同"
	}, false},
	{regexp.MustCompile(`^peak (\S+ \S+) at (.+)$`), func(m []string) string { return "峰值 " + m[1] + "，位于" + trWhere(m[2]) }, false},
	{regexp.MustCompile(`^PEAK: (.+)$`), func(m []string) string { return "峰值：" + trWhere(m[1]) }, false},
	{regexp.MustCompile(`^iteration \d+, .+$`), func(m []string) string { return trWhere(m[0]) }, false},
	{regexp.MustCompile(`^(forward|backward|optimizer|loss|setup) (\d+(?:\.\d+)?)$`), func(m []string) string {
		return phaseZh[m[1]] + " " + m[2]
	}, false},
	{regexp.MustCompile(`^Peak allocated memory per GPU vs (.+)$`), func(m []string) string { return "每 GPU 已分配显存峰值随 " + m[1] + " 的变化" }, false},
	{regexp.MustCompile(`^Headroom on (.+): (.+) × (.+)$`), func(m []string) string { return m[1] + " 上的余量：" + m[2] + " × " + m[3] }, false},
	{regexp.MustCompile(`^(.+) \(plan\)$`), func(m []string) string { return m[1] + "（当前计划）" }, false},
	{regexp.MustCompile(`^(\d+) layouts tried, (\d+) fit by their allocated peak, (\d+) replayed and fit$`), func(m []string) string {
		return "尝试 " + m[1] + " 种布局，" + m[2] + " 种按已分配峰值放得下，回放后 " + m[3] + " 种放得下"
	}, false},
	{regexp.MustCompile(`^limit (.+)$`), func(m []string) string { return "上限 " + m[1] }, false},
	{regexp.MustCompile(`^block (\d+)$`), func(m []string) string { return "第 " + m[1] + " 块" }, false},
	{regexp.MustCompile(`^(.+): memory over the training step$`), func(m []string) string { return m[1] + "：训练步内的显存" }, true},
	{regexp.MustCompile(`^(.+): live at the peak$`), func(m []string) string { return m[1] + "：峰值时刻存活的显存" }, true},
	{regexp.MustCompile(`^(.+) − (.+) at the allocated peak$`), func(m []string) string {
		return mine(m[1]) + " − " + mine(m[2]) + "：已分配峰值处的差异"
	}, false},
	{regexp.MustCompile(`^(.+): (\S+ \S+) \((.+)\); (.+): (\S+ \S+) \((.+)\)$`), func(m []string) string {
		return mine(m[1]) + "：" + m[2] + "（" + trWhere(m[3]) + "）；" + mine(m[4]) + "：" + m[5] + "（" + trWhere(m[6]) + "）"
	}, false},
	{regexp.MustCompile(`^Device memory over time \((.+)\)$`), func(m []string) string {
		return "设备显存随时间变化（" + strings.NewReplacer("simulated", "模拟的", "idle", "空闲").Replace(m[1]) + "）"
	}, true},
}
