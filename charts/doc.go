// Package charts draws VRAM Lab's interactive charts with ECharts, offline:
// the library (ECharts 5.4.3, Apache-2.0, see assets/) is embedded and
// emitted once per page, and each chart also carries its data as a table for
// pages where scripts do not run (an untrusted notebook, GitHub's preview).
//
//	charts.Setup()                                   // once, in the first cell
//	est, _ := plan.Estimate()
//	charts.Show(charts.Breakdown(est.Peak, "peak"))  // in a gonb cell
//	html := charts.HTML(charts.Breakdown(est.Peak, "peak")) // anywhere
//
// Options are built from go-echarts v2.7.2's option types (opts, SingleSeries)
// and rendered with our own loader: each chart's script is an IIFE that queues
// its drawing until the library is there, so cells can run in any order and
// be re-run. The library is wrapped so that an AMD define (require.js in
// classic Notebook and nbconvert exports) cannot capture it.
//
// User text (model names, labels) is escaped in the HTML and in the JSON,
// and can never become script.
package charts
