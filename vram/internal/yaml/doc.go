// Package yaml reads the YAML configs trainers are written in (axolotl,
// LLaMA-Factory, torchtune, accelerate, verl): block mappings and
// sequences by indentation (a sequence may sit at its key's indentation),
// compact mappings in sequence items, flow sequences and mappings, plain
// scalars (folded over more-indented lines), single- and double-quoted
// scalars, block scalars (| and >), comments and a leading "---". Scalars
// are typed as PyYAML (YAML 1.1) types them: true, false, yes, no, on,
// off; null, ~ and nothing; integers, floats with a dot or an exponent,
// .inf, .nan; anything else a string. Anchors, aliases and tags, which can
// make a small file expand without bound, are refused, and so is a second
// document; a key given twice is an error (PyYAML keeps the last,
// OmegaConf refuses it). Budgets: MaxBytes of input, MaxDepth of nesting,
// MaxNodes values. It knows nothing of memory.
//
// Resolve reads OmegaConf's interpolations, as verl's configs and their
// Hydra overrides use them (omegaconf 2.3, docs/source/usage.rst
// "Variable interpolation", custom_resolvers.rst), on a config written as
// dotted keys: ${a.b} names a key from the root, ${.x} a key beside this
// one and ${..x} one a level up; ${oc.select:key,default} is the key's
// value, or the default where the config has no such key;
// ${oc.env:VAR,default} is the default (the run's environment is not this
// machine's). A value that is one interpolation becomes the value it names
// (a number stays a number); text around an interpolation makes a string.
// An interpolation that names itself, or nests past maxInterpolationDepth,
// is an error, and the text interpolations make is bounded by MaxBytes.
//
//	tree, err := yaml.Parse(data)      // maps, slices, strings, bools, int64, float64, nil
//	derived, err := yaml.Resolve(flat) // ${a.b}, ${.x}, ${oc.select:…} resolved in place
package yaml
