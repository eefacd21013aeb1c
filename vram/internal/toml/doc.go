// Package toml reads torchtitan's job configs (and other trainers' TOML):
// tables ([a.b]) and arrays of tables ([[a]]), bare, quoted and dotted
// keys, basic, literal and multi-line strings, integers (with _, 0x, 0o,
// 0b), floats (inf, nan), booleans, arrays over several lines and inline
// tables; dates and times are kept as strings. A key or table given twice
// is an error, as TOML says. Budgets: MaxBytes of input, MaxDepth of
// nesting, MaxNodes values.
//
//	tree, err := toml.Parse(data) // map[string]any: tables are maps
package toml
