package gpu

import (
	"errors"
	"html"

	"github.com/janpfeifer/gonb/gonbui"
)

// Show is the one-liner for notebook cells: it takes a snapshot (simulated
// when VRAMLAB_FAKE_GPUS is set) and displays it as an HTML table, or says
// plainly why there is none. It returns the snapshot for further cells.
// Outside a notebook it displays nothing.
func Show() (Info, error) {
	s, err := Snapshot()
	if !gonbui.IsNotebook {
		return s, err
	}
	switch {
	case errors.Is(err, ErrNoDriver), errors.Is(err, ErrUnsupported):
		gonbui.DisplayHTML(`<p style="font:13px sans-serif">` + html.EscapeString(err.Error()) +
			` Set VRAMLAB_FAKE_GPUS=h100x8 (or call gpu.Fake) to see simulated GPUs.</p>`)
	case err != nil:
		gonbui.DisplayHTML(`<pre>` + html.EscapeString(err.Error()) + `</pre>`)
	default:
		gonbui.DisplayHTML(s.HTML())
	}
	gonbui.Sync()
	return s, err
}
