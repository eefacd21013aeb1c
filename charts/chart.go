package charts

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/janpfeifer/gonb/gonbui"
)

// Chart is one chart: an ECharts option plus the same data as a table, for
// pages where scripts do not run. Build one with Breakdown, Compare,
// Timeline, Sweep, FitMap, Flow, Layers, GPUs, Phases, Allocator or Search;
// display it with Show, or turn it into HTML with HTML.
type Chart struct {
	Title  string
	Option Option
	Table  Table
	Height int    // pixels; zero means 380
	Theme  string // "auto" (default: follows JupyterLab's theme), "light" or "dark"

	localized map[string]any // the option in Lang, set by HTML when it is not English
}

// Option is the ECharts option, built from go-echarts' option types.
type Option struct {
	Title           *opts.Title           `json:"title,omitempty"`
	Tooltip         *opts.Tooltip         `json:"tooltip,omitempty"`
	Legend          *opts.Legend          `json:"legend,omitempty"`
	Grid            []map[string]any      `json:"grid,omitempty"`
	XAxis           []map[string]any      `json:"xAxis,omitempty"`
	YAxis           []map[string]any      `json:"yAxis,omitempty"`
	VisualMap       []map[string]any      `json:"visualMap,omitempty"`
	Series          []charts.SingleSeries `json:"series"`
	BackgroundColor string                `json:"backgroundColor,omitempty"`
	Animation       *bool                 `json:"animation,omitempty"`
}

// Table is a chart's data in rows, shown where the chart cannot render.
type Table struct {
	Columns []string
	Rows    [][]string
}

// newID makes a page-unique element id; tests replace it for golden files.
var newID = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "vramlab-" + hex.EncodeToString(b[:])
}

// WithTitle returns c with a title (and a subtitle, when not empty) that
// says what this chart shows, for the kinds whose default is generic.
func (c Chart) WithTitle(title, subtitle string) Chart {
	title = user(title)
	c.Title = title
	t := opts.Title{Title: title}
	if c.Option.Title != nil {
		t = *c.Option.Title
		t.Title = title
	}
	if subtitle != "" {
		t.Subtitle = user(subtitle)
	}
	c.Option.Title = &t
	return c
}

// clean makes user text (model names, labels) safe to put in an option: it
// removes the marker go-echarts uses to splice raw JavaScript functions, so
// no label can become code. HTML escaping is done by the JSON encoder.
func clean(s string) string {
	for strings.Contains(s, "__f__") {
		s = strings.ReplaceAll(s, "__f__", "_f_")
	}
	return s
}

// userMark marks text a caller gave (a title, a label, a GPU's or a plan's
// name) from the moment a chart takes it until HTML renders it, so that
// translation leaves it as it is: a label that happens to be "other" or
// "parameters" stays the user's word. It is a private-use character, taken
// out of the text it marks.
const userMark = "\uE000"

// user is a caller's text, cleaned and marked as theirs.
func user(s string) string {
	return userMark + strings.ReplaceAll(clean(s), userMark, "")
}

func userAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = user(s)
	}
	return out
}

// unmark removes the marks of a caller's text.
func unmark(s string) string { return strings.ReplaceAll(s, userMark, "") }

var funcRE = regexp.MustCompile(`"__f__((?:[^"\\]|\\.)*?)__f__"`)

// optionJSON encodes the option (an Option, or its localized tree);
// go-echarts FuncOpts become raw functions.
func optionJSON(o any) (string, error) {
	b, err := json.Marshal(o) // escapes <, > and & inside strings
	if err != nil {
		return "", err
	}
	var fail error
	out := funcRE.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := funcRE.FindSubmatch(m)
		s, err := strconv.Unquote(`"` + string(sub[1]) + `"`)
		if err != nil {
			fail = err
			return m
		}
		return []byte(s)
	})
	return string(out), fail
}

// HTML renders c as a self-contained fragment: a div, the fallback table,
// and a script that draws the chart once the ECharts loader has run (in any
// order of cells). It needs the loader (LoaderHTML, or Setup in a notebook)
// once per page.
func HTML(c Chart) string {
	id := newID()
	h := c.Height
	if h <= 0 {
		h = 380
	}
	c, err := localize(c)
	if err != nil {
		return "<pre>chart error: " + html.EscapeString(err.Error()) + "</pre>"
	}
	var opt any = c.Option
	if c.localized != nil {
		opt = c.localized
	}
	js, err := optionJSON(opt)
	if err != nil {
		return "<pre>chart error: " + html.EscapeString(err.Error()) + "</pre>"
	}
	js = unmark(js)
	theme := c.Theme
	switch theme {
	case "light", "dark":
	default:
		theme = "auto"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<div class="vramlab-chart" id="%s">`, id)
	fmt.Fprintf(&b, `<div class="vramlab-canvas" style="width:100%%;height:%dpx;display:none"></div>`, h)
	b.WriteString(tableHTML(c.Title, c.Table))
	b.WriteString(`</div>`)
	// An IIFE with no top-level names, so re-running a cell cannot collide.
	// The tooltip formatter's lines become text nodes (tipJS).
	fmt.Fprintf(&b, `<script>(function(){var id=%q,theme=%q;`+tipJS+titleJS+`var draw=function(){var root=document.getElementById(id);if(!root||!window.echarts)return;`+
		`var el=root.querySelector('.vramlab-canvas');el.style.display='block';var tb=root.querySelector('.vramlab-fallback');if(tb)tb.style.display='none';`+
		`if(theme==='auto'){var b=document.body;theme=(b&&b.getAttribute('data-jp-theme-light')==='false')?'dark':'light';}`+
		`var o=%s;textTips(o);fitTitles(o,el.clientWidth);var ch=echarts.getInstanceByDom(el)||echarts.init(el,theme==='dark'?'dark':null,{renderer:window.vramlabRenderer==='svg'?'svg':'canvas'});ch.setOption(o);`+
		`if(window.ResizeObserver){var lastW=el.clientWidth;new ResizeObserver(function(){var w=el.clientWidth;if(w&&w!==lastW){lastW=w;fitTitles(o,w);ch.setOption({title:o.title,grid:o.grid});}ch.resize();}).observe(el);}};`+
		`(window.__vramlabQ=window.__vramlabQ||[]).push(draw);`+
		`setTimeout(function(){var root=document.getElementById(id);if(root&&!window.echarts){var n=document.createElement('p');n.className='vramlab-note';`+
		`n.textContent='Interactive chart not drawn: ECharts is not loaded on this page (run charts.Setup() first, and trust the notebook). The data is in the table.';root.appendChild(n);}},4000);`+
		`})();</script>`, id, theme, js)
	return b.String()
}

// tipJS defines textTips, which wraps an option's tooltip formatter so that
// what it returns is shown as text, never parsed as HTML. A formatter returns
// lines: a string, or [color, text] for a line with a colored marker; a
// plain string result is one line. ECharts (5.x, TooltipHTMLContent
// setContent) appends returned DOM nodes as they are, and would set a
// returned string as innerHTML.
const tipJS = `var textTips=function(o){var t=o.tooltip;if(!t||typeof t.formatter!=='function')return;var f=t.formatter;` +
	`t.formatter=function(p){var ls=f(p);if(!Array.isArray(ls))ls=[ls];var d=document.createElement('div');d.className='vramlab-tip';` +
	`ls.forEach(function(l){var r=document.createElement('div');if(Array.isArray(l)){var m=document.createElement('span');` +
	`m.style.cssText='display:inline-block;margin-right:5px;border-radius:5px;width:10px;height:10px';` +
	`if(typeof l[0]==='string')m.style.backgroundColor=l[0];r.appendChild(m);l=l[1];}` +
	`r.appendChild(document.createTextNode(l==null?'':String(l)));d.appendChild(r);});return d;};};`

// titleJS defines fitTitles, which wraps a title and subtitle longer than
// the chart is wide onto further lines (a long model name on an A4 page)
// instead of running past the edge, with lines a readable distance apart,
// and moves the plot down below them: the grid's top is at least the
// height the wrapped lines take (measured with the title's fonts, 18 px
// bold and 12 px), and the room a grid asks to keep above its plot
// (vramlabPinRoom: the timeline's peak pin), so a wrapped subtitle never
// lands on the top axis label or the pin.
// It runs again when the chart is resized (a window made narrower).
const titleJS = `var fitTitles=function(o,w){if(!o.title||!w)return;var cx=document.createElement('canvas').getContext('2d');` +
	`var lines=function(s,font){if(!s)return 0;cx.font=font;return String(s).split('\n').reduce(function(n,l){return n+Math.max(1,Math.ceil(cx.measureText(l).width/(w-20)));},0);};` +
	`var need=0;[].concat(o.title).forEach(function(t){` +
	`t.textStyle=Object.assign({overflow:'break',lineHeight:22},t.textStyle||{},{width:w-20});` +
	`t.subtextStyle=Object.assign({overflow:'break',lineHeight:16},t.subtextStyle||{},{width:w-20});` +
	`need=Math.max(need,10+22*lines(t.text,'bold 18px sans-serif')+16*lines(t.subtext,'12px sans-serif')+24);});` +
	`if(o.grid)o.grid=[].concat(o.grid).map(function(g){var top=parseFloat(g.top),room=g.vramlabPinRoom||0;if(!isNaN(top)&&top<need+room)g.top=need+room;return g;});};`

// tableHTML renders the fallback table (visible until the chart draws).
func tableHTML(title string, t Table) string {
	var b strings.Builder
	b.WriteString(`<table class="vramlab-fallback" style="border-collapse:collapse;font:12px sans-serif">`)
	if title != "" {
		fmt.Fprintf(&b, `<caption style="text-align:left;font-weight:bold">%s</caption>`, html.EscapeString(title))
	}
	if len(t.Columns) > 0 {
		b.WriteString("<tr>")
		for _, c := range t.Columns {
			fmt.Fprintf(&b, `<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #999">%s</th>`, html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	for _, row := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range row {
			fmt.Fprintf(&b, `<td style="padding:2px 8px">%s</td>`, html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	return b.String()
}

//go:embed assets/echarts.min.js
var echartsJS string

// EChartsVersion is the embedded ECharts release (the one go-echarts v2.7.2
// targets).
const EChartsVersion = "5.4.3"

// LoaderHTML is the script that defines window.echarts from the embedded
// library (once per page) and draws every chart queued before it. The
// library is wrapped so that an AMD define (require.js in classic Notebook and
// nbconvert exports) cannot capture it.
func LoaderHTML() string {
	js := strings.ReplaceAll(echartsJS, "</script", `<\/script`)
	js = strings.ReplaceAll(js, "<!--", `<\!--`)
	var b bytes.Buffer
	// JupyterLab's output area breaks printed lines anywhere, mid-word
	// (.jp-OutputArea-output pre: word-break: break-all); the notebook's
	// lines break at word boundaries instead, and mid-word only where one
	// word does not fit (the exported reports' template says the same).
	b.WriteString(`<style>.jp-Notebook .jp-OutputArea-output pre{word-break:normal;overflow-wrap:anywhere}</style>`)
	b.WriteString(`<div class="vramlab-loader" style="display:none" data-echarts="` + EChartsVersion + `"></div><script>(function(){if(!(window.echarts&&window.echarts.init)){(function(define,exports,module){`)
	b.WriteString(js)
	b.WriteString("\n}).call(window);}var q=window.__vramlabQ||[];window.__vramlabQ={push:function(f){try{f();}catch(e){console.error(e);}}};" +
		"for(var i=0;i<q.length;i++){try{q[i]();}catch(e){console.error(e);}}})();</script>")
	return b.String()
}

// Page is a complete offline HTML page with the loader and the charts.
func Page(title string, cs ...Chart) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head><body style=\"font-family:sans-serif\">\n", html.EscapeString(title))
	b.WriteString(LoaderHTML())
	for _, c := range cs {
		b.WriteString("\n")
		b.WriteString(HTML(c))
	}
	b.WriteString("\n</body></html>\n")
	return b.String()
}

// Setup displays the ECharts loader in a notebook cell. Call it once, in an
// early cell: exported notebooks then carry the library with them. Outside
// a notebook it does nothing.
func Setup() {
	if !gonbui.IsNotebook {
		return
	}
	gonbui.DisplayHTML(LoaderHTML())
	// The cell's process may exit right after; wait until the kernel has the
	// (megabyte-sized) output, or it can be lost under load.
	gonbui.Sync()
	markLoaded()
}

// Show displays c in a notebook cell (nothing outside a notebook). If no
// cell of this kernel session has shown the loader yet, it is shown first.
func Show(c Chart) {
	if !gonbui.IsNotebook {
		return
	}
	if !loaded() {
		Setup()
	}
	gonbui.DisplayHTML(HTML(c))
	gonbui.Sync()
}

// The kernel runs each cell as a new process; a marker file in its temp
// dir remembers that the loader was shown.
func markerPath() string {
	d := os.Getenv("GONB_TMP_DIR")
	if d == "" {
		return ""
	}
	return filepath.Join(d, ".vramlab-echarts-loaded")
}

func loaded() bool {
	p := markerPath()
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

func markLoaded() {
	if p := markerPath(); p != "" {
		_ = os.WriteFile(p, nil, 0o644)
	}
}
