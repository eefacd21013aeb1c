package main

import (
	"fmt"
	"strings"
)

// torchtitanCommits are the torchtitan commits the reference cases ran,
// each with the newest release its code descends from, as `git describe
// --tags --match 'v*'` names it in pytorch/torchtitan (PyPI's release
// dates: 0.0.2 2024-04-16, 0.1.0 2025-06-18, 0.2.0 2025-10-18, 0.2.2
// 2026-02-20, 0.3.0 2026-09-03). A commit between releases runs the older
// release's rules unless a change between them is modelled: none of the
// commits below crosses one (#1580, early stop off, 25413d224 of
// 2025-08-29, is after 6fc499f6 and before 0.2.0 and bcc09297).
var torchtitanCommits = map[string]string{
	"9dec370ad26b": "0.0.2", // 2024-12-26
	"e7c0cae934df": "0.0.2", // 2025-06-11, before v0.1.0 (2025-06-17)
	"2c8b59479912": "0.1.0", // 2025-08-08
	"6fc499f6f5b3": "0.1.0", // 2025-08-14
	"bcc09297a1d8": "0.2.2", // 2026-08-05, after v0.2.2, before 0.3.0
}

// torchtitanRelease is the release a case's torchtitan_commit runs: a
// commit of the table, or a case's "unknown (torchtitan X.Y.Z, …)".
func torchtitanRelease(commit string) (string, error) {
	if rest, ok := strings.CutPrefix(commit, "unknown (torchtitan "); ok {
		if v, _, ok := strings.Cut(rest, ","); ok {
			return v, nil
		}
	}
	if len(commit) >= 12 {
		if v, ok := torchtitanCommits[commit[:12]]; ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("train.torchtitan_commit %q: not a commit examples/validate/torchtitan.go places among torchtitan's releases; add it there or set train.torchtitan", commit)
}
