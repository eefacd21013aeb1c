package vram

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Versions as data. What a GPU holds depends on the release of each engine
// and framework a run uses: vLLM 0.33 sizes its KV cache after an estimate
// of its CUDA graphs, 0.11 did not. A plan names the releases it runs
// (Versions, the plan file's "versions"); each engine's model keeps a
// release table — the releases it models, each row citing the source line
// its rules come from — in its own file; a release the table lacks
// resolves to the nearest modelled one, with a note; an unnamed release is
// the newest row, the current release. Every answer carries the releases
// it modelled (Modelled).

// Versions names the release of each library a plan runs with; empty
// means the current release (the newest row of the library's table).
type Versions struct {
	VLLM         string `json:"vllm,omitempty"`
	SGLang       string `json:"sglang,omitempty"`
	TGI          string `json:"tgi,omitempty"`
	LlamaCpp     string `json:"llama_cpp,omitempty"` // a build tag such as "b6123"
	Ollama       string `json:"ollama,omitempty"`
	Transformers string `json:"transformers,omitempty"`
	Torch        string `json:"torch,omitempty"`
	TRL          string `json:"trl,omitempty"`
	PEFT         string `json:"peft,omitempty"`
	DeepSpeed    string `json:"deepspeed,omitempty"`
	Verl         string `json:"verl,omitempty"`
	Torchtitan   string `json:"torchtitan,omitempty"`
	Bitsandbytes string `json:"bitsandbytes,omitempty"`
	NCCL         string `json:"nccl,omitempty"`
}

// Version is a release as major, minor, patch ("0.33.0"; "0.33" is
// 0.33.0; llama.cpp's build tag "b6123" is 6123.0.0).
type Version [3]int

// releasePattern is a release as Python projects tag them (PEP 440's
// common forms): "0.33.0", "v0.33", a fourth number for a hotfix (vLLM's
// 0.10.1.1, which shares 0.10.1's rules: Version keeps three), with a
// pre-release ("rc1", "a2", "b1"), a ".devN" or ".postN" segment, or a
// local "+cu132" part.
var releasePattern = regexp.MustCompile(`^v?(\d{1,5})\.(\d{1,5})(?:\.(\d{1,5}))?(?:\.\d{1,5})?(?:(?:a|b|rc)\d{1,5})?(?:\.(?:dev|post)\d{1,9})?(?:\+[A-Za-z0-9.]{1,40})?$`)

// buildPattern is llama.cpp's build tag.
var buildPattern = regexp.MustCompile(`^b(\d{1,6})$`)

// ParseVersion reads a release of lib as its project tags it: "0.33.0",
// "v0.33.0", "0.33", a pre-release, development or local suffix
// ("0.11.0rc1", "0.7.3.dev233", "2.15.0+cu132") read as its release,
// llama.cpp's "b6123". Anything else is refused, so what a plan names is
// a release before it is repeated in a note.
func ParseVersion(lib, s string) (Version, error) {
	if lib == "llama_cpp" {
		m := buildPattern.FindStringSubmatch(s)
		if m == nil {
			return Version{}, fmt.Errorf("versions.llama_cpp %q: want a build tag such as \"b6123\"", s)
		}
		n, _ := strconv.Atoi(m[1])
		return Version{n}, nil
	}
	m := releasePattern.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("versions.%s %q: want a release such as \"0.33.0\"", lib, s)
	}
	var v Version
	for i, p := range m[1:4] {
		if p != "" {
			v[i], _ = strconv.Atoi(p)
		}
	}
	return v, nil
}

// Less reports whether v is an older release than w.
func (v Version) Less(w Version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Modelled says which release of a library an answer modelled.
type Modelled struct {
	Library string `json:"library"`
	// Asked is the release the plan named; empty for the current one.
	Asked string `json:"asked,omitempty"`
	// Release is the modelled release whose rules ran.
	Release string `json:"release"`
	// Source is where the row's rules come from.
	Source string `json:"source"`
	// Note says how an Asked release the table lacks was resolved, or
	// that a framework running the engine supports other releases (TRL's
	// vLLM range).
	Note string `json:"note,omitempty"`
}

func (m Modelled) String() string {
	s := m.Library + " " + m.Release
	if m.Note != "" {
		s += " (" + m.Note + ")"
	}
	return s
}

// releaseRow is the part of a release table's row every table has.
type releaseRow struct {
	Version string // the release, as its project tags it
	Source  string // where the row's rules are read: the release's files and lines
}

// row is the releaseRow a table's row embeds.
func (r releaseRow) row() releaseRow { return r }

// resolveRelease resolves asked against a library's release table, whose
// rows embed releaseRow (pickRelease): the row and what the answer says
// it modelled.
func resolveRelease[T interface{ row() releaseRow }](lib, asked string, table []T) (T, Modelled, error) {
	rows := make([]releaseRow, len(table))
	for i, r := range table {
		rows[i] = r.row()
	}
	i, m, err := pickRelease(lib, asked, rows)
	if err != nil {
		var none T
		return none, Modelled{}, err
	}
	return table[i], m, nil
}

// pickRelease resolves asked against a library's table (rows oldest
// first; each row is the release its rules were read at): the row of that
// release; else the newest row before it, whose rules it shares unless a
// release between them changed one, which the note says; else, for a
// release older than every row, the oldest. Empty asked is the newest
// row, the current release.
func pickRelease(lib, asked string, rows []releaseRow) (int, Modelled, error) {
	if len(rows) == 0 {
		return 0, Modelled{}, fmt.Errorf("%s: no release table", lib)
	}
	pick := len(rows) - 1
	out := Modelled{Library: lib, Asked: asked}
	if asked != "" {
		v, err := ParseVersion(lib, asked)
		if err != nil {
			return 0, Modelled{}, err
		}
		versions := make([]Version, len(rows))
		pick = -1
		for i, r := range rows {
			if versions[i], err = ParseVersion(lib, r.Version); err != nil {
				panic(fmt.Sprintf("%s's release table: %v", lib, err)) // the tables' own tests read every row
			}
			if !v.Less(versions[i]) {
				pick = i
			}
		}
		switch {
		case pick < 0:
			pick = 0
			out.Note = fmt.Sprintf("%s %s is older than every modelled release; modelled as %s, the oldest", lib, asked, rows[0].Version)
		case versions[pick] == v:
		case pick == len(rows)-1:
			out.Note = fmt.Sprintf("%s %s is newer than the newest modelled release; modelled as %s", lib, asked, rows[pick].Version)
		default:
			out.Note = fmt.Sprintf("%s %s is not modelled; modelled with the rules of %s, the newest modelled release before it (%s is the next)", lib, asked, rows[pick].Version, rows[pick+1].Version)
		}
	}
	out.Release, out.Source = rows[pick].Version, rows[pick].Source
	return pick, out, nil
}

// ApplyVersions checks the plan's versions and gives each to the part of
// the plan it runs: vLLM's and SGLang's to the launch and to a
// post-training rollout on it, transformers', bitsandbytes', NCCL's and
// torchtitan's to the training step (where a release named inside "train"
// must agree).
func (p *Plan) ApplyVersions(v Versions) error {
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if s := rv.Field(i).String(); s != "" {
			lib := strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
			if _, err := ParseVersion(lib, s); err != nil {
				return err
			}
		}
	}
	p.Versions = v
	if p.VLLM != nil {
		p.VLLM.Version = v.VLLM
	}
	if p.SGLang != nil {
		p.SGLang.Version = v.SGLang
	}
	if p.TGI != nil {
		p.TGI.Version = v.TGI
	}
	if p.LlamaCpp != nil {
		p.LlamaCpp.Version = v.LlamaCpp
	}
	if p.Ollama != nil {
		p.Ollama.Version = v.Ollama
	}
	if pt := p.PostTraining; pt != nil {
		pt.Torch = v.Torch
	}
	if pt := p.PostTraining; pt != nil && pt.Rollout != nil {
		switch pt.Rollout.Engine {
		case "vllm":
			pt.Rollout.Version = v.VLLM
		case "sglang":
			pt.Rollout.Version = v.SGLang
		}
	}
	if t := p.Training; t != nil {
		for _, c := range []struct {
			lib       string
			plan, run *string
		}{{"transformers", &v.Transformers, &t.Transformers}, {"bitsandbytes", &v.Bitsandbytes, &t.Bitsandbytes}, {"nccl", &v.NCCL, &t.NCCL}, {"torchtitan", &v.Torchtitan, &t.Torchtitan}} {
			switch {
			case *c.plan == "":
			case *c.run != "" && *c.run != *c.plan:
				return fmt.Errorf("versions.%s %q and train.%s %q differ: name the release once (versions.%s)", c.lib, *c.plan, c.lib, *c.run, c.lib)
			default:
				*c.run = *c.plan
			}
		}
	}
	return nil
}

// Releases lists the releases the plan's answer models, for each library
// whose rules change with its release and that the plan runs.
func (p Plan) Releases() ([]Modelled, error) {
	var out []Modelled
	if m, err := p.vllmModelled(); err != nil {
		return nil, err
	} else if m != nil {
		out = append(out, *m)
	}
	sg := p.SGLang
	if pt := p.PostTraining; pt != nil && pt.Rollout != nil && pt.Rollout.Engine == "sglang" {
		sg = &SGLang{Version: pt.Rollout.Version}
	}
	if sg != nil {
		_, m, err := sg.release()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if p.LlamaCpp != nil {
		_, m, err := p.LlamaCpp.release()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if p.TGI != nil {
		m, err := p.TGI.release()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if p.Ollama != nil {
		_, m, err := p.Ollama.release()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if pt := p.PostTraining; pt != nil && pt.Framework == "trl" {
		_, m, err := TRLReleaseFor(p.Versions.TRL)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if t := p.Training; t != nil && t.Parallel.GPUs() > 1 {
		_, m, err := ncclReleaseOf(t.NCCL)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if t := p.Training; t != nil && t.Framework == FrameworkTorchtitan {
		_, m, err := torchtitanReleaseOf(t.Torchtitan)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if p.Training != nil || p.PostTraining != nil || p.Inference != nil && p.VLLM == nil && p.SGLang == nil && p.TGI == nil {
		_, m, err := torchReleaseOf(p.Versions.Torch)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if t := p.Training; t != nil && t.Framework.RunsTransformers() {
		m := Modelled{Library: "transformers", Asked: t.Transformers, Release: Transformers, Source: "the family files' recipes (family_*.go), measured with transformers " + Transformers}
		if t.Transformers != "" {
			m.Release = t.Transformers
		}
		tm := t.Model.Normalize()
		lib, first, err := transformersOf(tm, t.Transformers)
		if err != nil {
			return nil, err
		}
		if lib[0] >= 5 {
			// transformers5.go: the 4.57 rules stand for a family 5.23
			// left unchanged, a transformers 5 model's own rules for it;
			// the note cites its trace.
			note, err := transformers5Step(tm, lib)
			if err != nil {
				return nil, err
			}
			m.Release, m.Note = Transformers, note
			if only5(tm) {
				m.Release, m.Note = transformers5String(), strings.TrimPrefix(first+"; "+note, "; ")
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// vllmModelled is the vLLM release the plan's answer models, its own or
// its rollout's (nil where it runs no vLLM), with TRL's warning where the
// rollout's release lies outside what the plan's TRL supports.
func (p Plan) vllmModelled() (*Modelled, error) {
	engine := p.VLLM
	if pt := p.PostTraining; pt != nil && pt.Rollout != nil && pt.Rollout.Engine == "vllm" && pt.Rollout.Placement != "separate" {
		engine = &VLLM{Version: pt.Rollout.Version}
	}
	if engine == nil {
		return nil, nil
	}
	_, m, err := engine.release()
	if err != nil {
		return nil, err
	}
	if pt := p.PostTraining; pt != nil && pt.Framework == "trl" && pt.Rollout != nil && pt.Rollout.Engine == "vllm" {
		trl, _, err := TRLReleaseFor(p.Versions.TRL)
		if err != nil {
			return nil, err
		}
		if w := trl.vllmOutsideRange(orDefault(m.Asked, m.Release)); w != "" {
			m.Note = strings.Join(slices.DeleteFunc([]string{m.Note, w}, func(s string) bool { return s == "" }), "; ")
		}
	}
	return &m, nil
}

// ModelledReleases lists, for each library whose rules change with its
// release, the releases the engine models, oldest first (the rows of its
// release table; transformers: the release the family recipes follow).
func ModelledReleases() map[string][]string {
	// transformers: the release the family recipes follow, and the 5.x
	// release a plan may name for the families traced there
	// (transformers5.go).
	out := map[string][]string{"transformers": {Transformers, transformers5String()}}
	for _, r := range vllmReleases {
		out["vllm"] = append(out["vllm"], r.Version)
	}
	for _, r := range sglangReleases {
		out["sglang"] = append(out["sglang"], r.Version)
	}
	for _, r := range ncclReleases {
		out["nccl"] = append(out["nccl"], r.Version)
	}
	for _, r := range tgiReleases {
		out["tgi"] = append(out["tgi"], r.Version)
	}
	for _, r := range torchReleases {
		out["torch"] = append(out["torch"], r.Version)
	}
	for _, r := range torchtitanReleases {
		out["torchtitan"] = append(out["torchtitan"], r.Version)
	}
	for _, r := range trlReleases {
		out["trl"] = append(out["trl"], r.Version)
	}
	for _, r := range llamaCppReleases {
		out["llama_cpp"] = append(out["llama_cpp"], r.Version)
	}
	for _, r := range ollamaReleases {
		out["ollama"] = append(out["ollama"], r.Version)
	}
	return out
}

// ParseVersions reads releases written as the plan file's keys take them,
// "trl=0.25.0,vllm=0.14.1" (the CLI's -versions): each key one of Versions'
// (vllm, sglang, trl, transformers, nccl, …), each value a release; a
// library named twice takes its last release, as a repeated flag does.
func ParseVersions(s string) (Versions, error) {
	var v Versions
	rv := reflect.ValueOf(&v).Elem()
	keys := map[string]int{}
	for i := range rv.NumField() {
		keys[strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]] = i
	}
	for item := range strings.SplitSeq(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		i, known := keys[k]
		switch {
		case !ok || val == "":
			return Versions{}, fmt.Errorf("versions %q: want library=release, such as trl=0.25.0", item)
		case !known:
			return Versions{}, fmt.Errorf("versions: unknown library %q; known: %s", k, strings.Join(slices.Sorted(maps.Keys(keys)), ", "))
		}
		if _, err := ParseVersion(k, val); err != nil {
			return Versions{}, err
		}
		rv.Field(i).SetString(val)
	}
	return v, nil
}
