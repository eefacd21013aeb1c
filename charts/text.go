package charts

import (
	"fmt"
	"html"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"
)

// Fragment is HTML built by this package from text: every string that goes
// into one is escaped on the way in, so user text (plan names, model names,
// paths, labels) is always shown as text and never becomes markup. Build
// fragments with Heading, Para, Bold, Code, KeyValues and TableOf, join them
// with Join, and show them with Display.
//
//	charts.Display(charts.Heading(2, plan.Name), charts.Para("Model ", charts.Code(ref), "."))
type Fragment string

// Text escapes s.
func Text(s string) Fragment { return Fragment(html.EscapeString(s)) }

// inline turns the parts of a paragraph into HTML: Fragments as they are,
// everything else as escaped text (fmt.Sprint).
func inline(parts []any) string {
	var b strings.Builder
	for _, p := range parts {
		switch v := p.(type) {
		case Fragment:
			b.WriteString(string(v))
		case string:
			b.WriteString(html.EscapeString(v))
		default:
			b.WriteString(html.EscapeString(fmt.Sprint(v)))
		}
	}
	return b.String()
}

// Heading is an <h1>…<h6> of text (level clamped to 1…6).
func Heading(level int, parts ...any) Fragment {
	level = min(max(level, 1), 6)
	return Fragment(fmt.Sprintf("<h%d>%s</h%d>", level, inline(parts), level))
}

// Para is a paragraph of text and fragments.
func Para(parts ...any) Fragment { return Fragment("<p>" + inline(parts) + "</p>") }

// Bold is text in bold.
func Bold(parts ...any) Fragment { return Fragment("<strong>" + inline(parts) + "</strong>") }

// Code is text in a monospace font.
func Code(s string) Fragment { return Fragment("<code>" + html.EscapeString(s) + "</code>") }

// Pre is preformatted text (a block of aligned lines).
func Pre(s string) Fragment {
	return Fragment(`<pre style="font:12px monospace;margin:4px 0">` + html.EscapeString(s) + "</pre>")
}

// KeyValues is a two-column table of settings.
func KeyValues(rows [][2]string) Fragment {
	t := Table{Columns: []string{"setting", "value"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r[0], r[1]})
	}
	return TableOf(t)
}

// TableOf renders t as a table (every cell text).
func TableOf(t Table) Fragment {
	var b strings.Builder
	b.WriteString(`<table class="vramlab-table" style="border-collapse:collapse;font:13px sans-serif;margin:6px 0">`)
	if len(t.Columns) > 0 {
		b.WriteString("<thead><tr>")
		for _, c := range t.Columns {
			fmt.Fprintf(&b, `<th style="text-align:left;padding:3px 10px;border-bottom:1px solid #999">%s</th>`, html.EscapeString(c))
		}
		b.WriteString("</tr></thead>")
	}
	b.WriteString("<tbody>")
	for _, row := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range row {
			fmt.Fprintf(&b, `<td style="text-align:left;padding:3px 10px;border-bottom:1px solid #eee">%s</td>`, html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	return Fragment(b.String())
}

// Join concatenates fragments.
func Join(fs ...Fragment) Fragment {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(string(f))
	}
	return Fragment(b.String())
}

// Display shows fragments in a notebook cell (nothing outside a notebook).
func Display(fs ...Fragment) {
	if !gonbui.IsNotebook {
		return
	}
	gonbui.DisplayHTML(string(Join(fs...)))
	gonbui.Sync()
}
