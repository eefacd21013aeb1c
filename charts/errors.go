package charts

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/janpfeifer/gonb/gonbui"
)

// Must ends a notebook cell when err is not nil, printing err once on the
// cell's stderr: one line a reader can act on ("model.name: unknown model
// preset …; did you mean …?"), without the goroutine trace and temporary
// file paths a panic prints. Outside a notebook it panics, as a Go program
// would.
//
//	est, err := plan.Estimate()
//	charts.Must(err)
func Must(err error) {
	if err == nil {
		return
	}
	if !gonbui.IsNotebook {
		panic(err)
	}
	stop(os.Stderr, err.Error())
}

// Failf ends a notebook cell with a formatted message, as Must does.
func Failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !gonbui.IsNotebook {
		panic(msg)
	}
	stop(os.Stderr, msg)
}

// exit is os.Exit, replaced in tests.
var exit = os.Exit

func stop(w io.Writer, msg string) {
	gonbui.Sync() // what the cell displayed before the error stays
	fmt.Fprintln(w, "error: "+strings.TrimSpace(msg))
	exit(1)
}
