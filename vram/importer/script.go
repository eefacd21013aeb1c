package importer

import (
	"fmt"
	"strings"
)

// Launch scripts as projects publish them: comments, `export TP=4`
// assignments used later as $TP, several commands (one per line, or
// joined by ; && ||), a config written by a here-document (`cat >
// config.yaml << EOF … EOF`) and `docker run … IMAGE ARGS`. The importer
// runs nothing: it reads the words as a POSIX shell splits them, expands
// only the variables the script itself assigns, and takes the first
// command that is a server or a trainer.

// script is a launch script read into its commands.
type script struct {
	commands [][]string
	// files are the here-documents written to a file by cat or tee.
	files map[string][]byte
}

// maxScriptCommands bounds the commands a script may hold.
const maxScriptCommands = 1024

// parseScript reads a launch script.
func parseScript(s string) (script, error) {
	sc := script{files: map[string][]byte{}}
	p := scriptParser{s: s, sc: &sc}
	if err := p.run(); err != nil {
		return sc, err
	}
	x := expander{vars: map[string]string{}}
	arrays := map[string][]string{}
	var out [][]string
	for _, words := range sc.commands {
		words, err := x.words(words)
		if err != nil {
			return sc, err
		}
		words = expandArrays(words, arrays)
		if len(words) > maxCommandArgs {
			return sc, fmt.Errorf("command: more than %d words", maxCommandArgs)
		}
		if arrayAssignment(words, arrays) || assignments(words, x.vars) {
			continue
		}
		out = append(out, words)
	}
	sc.commands = out
	return sc, nil
}

// scriptParser splits a script into commands of words, quotes and
// escapes as splitCommand reads them.
type scriptParser struct {
	s       string
	i       int
	sc      *script
	words   []string
	cur     strings.Builder
	inWord  bool
	heredoc []string // delimiters waiting for the next line
	array   bool     // inside NAME=( … ), which newlines do not end
}

func (p *scriptParser) run() error {
	for ; p.i < len(p.s); p.i++ {
		if err := p.step(); err != nil {
			return err
		}
		if len(p.sc.commands) > maxScriptCommands {
			return fmt.Errorf("script: more than %d commands", maxScriptCommands)
		}
		if len(p.words) > maxCommandArgs {
			return fmt.Errorf("command: more than %d words", maxCommandArgs)
		}
	}
	p.endCommand()
	return nil
}

func (p *scriptParser) step() error {
	c := p.s[p.i]
	switch {
	case c == '\\' && p.i+1 < len(p.s) && (p.s[p.i+1] == '\n' || p.s[p.i+1] == '\r'):
		p.i++
		if p.s[p.i] == '\r' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n' {
			p.i++
		}
	case c == '\\' && p.i+1 < len(p.s):
		p.i++
		p.cur.WriteByte(p.s[p.i])
		p.inWord = true
	case c == '\'' || c == '"':
		return p.quote(c)
	case c == '#' && !p.inWord:
		for p.i+1 < len(p.s) && p.s[p.i+1] != '\n' {
			p.i++
		}
	case c == '<' && !p.inWord && strings.HasPrefix(p.s[p.i:], "<<"):
		return p.startHeredoc()
	case c == '(' && p.inWord && isArrayStart(p.cur.String()):
		p.endWord()
		p.words = append(p.words, "(")
		p.array = true
	case c == ')' && p.array:
		p.endWord()
		p.words = append(p.words, ")")
		p.array = false
	case c == '\n' && p.array:
		p.endWord()
	case c == '\n':
		p.endWord()
		if len(p.heredoc) > 0 {
			return p.readHeredocs()
		}
		p.endCommand()
	case c == ';' || c == '|' || c == '&':
		p.endWord()
		p.endCommand()
	case c == ' ' || c == '\t' || c == '\r':
		p.endWord()
	default:
		p.cur.WriteByte(c)
		p.inWord = true
	}
	return nil
}

// dquoteEscapes are the escapes a shell reads inside double quotes.
var dquoteEscapes = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`)

func (p *scriptParser) quote(c byte) error {
	j := p.i + 1
	for j < len(p.s) && p.s[j] != c {
		if c == '"' && p.s[j] == '\\' && j+1 < len(p.s) {
			j++
		}
		j++
	}
	if j >= len(p.s) {
		return fmt.Errorf("command: an unterminated %c quote", c)
	}
	body := p.s[p.i+1 : j]
	if c == '"' {
		body = dquoteEscapes.Replace(body)
	}
	p.cur.WriteString(body)
	p.inWord, p.i = true, j
	return nil
}

func (p *scriptParser) endWord() {
	if p.inWord {
		p.words = append(p.words, p.cur.String())
		p.cur.Reset()
		p.inWord = false
	}
}

func (p *scriptParser) endCommand() {
	p.endWord()
	if len(p.words) > 0 {
		p.sc.commands = append(p.sc.commands, p.words)
	}
	p.words = nil
}

// startHeredoc reads `<< EOF`, `<<-'EOF'`: the delimiter's lines follow
// the command's line.
func (p *scriptParser) startHeredoc() error {
	p.i += 2
	for p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
	j := p.i
	for j < len(p.s) && !strings.ContainsRune(" \t\r\n;&|<>", rune(p.s[j])) {
		j++
	}
	delim := strings.Trim(p.s[p.i:j], `'"`)
	if delim == "" {
		return fmt.Errorf("script: a here-document without a delimiter")
	}
	p.heredoc = append(p.heredoc, delim)
	p.i = j - 1
	return nil
}

// readHeredocs takes each waiting here-document's lines, up to its
// delimiter, and files it under the command's `> FILE` or `tee FILE`.
func (p *scriptParser) readHeredocs() error {
	for _, delim := range p.heredoc {
		var body strings.Builder
		found := false
		for p.i+1 < len(p.s) {
			end := strings.IndexByte(p.s[p.i+1:], '\n')
			line := p.s[p.i+1:]
			if end >= 0 {
				line = p.s[p.i+1 : p.i+1+end]
			}
			p.i += len(line) + 1
			if strings.TrimSpace(line) == delim {
				found = true
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		if !found {
			return fmt.Errorf("script: the here-document %q has no closing %s line", delim, delim)
		}
		if f := heredocTarget(p.words); f != "" {
			p.sc.files[f] = []byte(body.String())
		}
	}
	p.heredoc = nil
	p.endCommand()
	return nil
}

// heredocTarget is the file `cat > FILE` or `tee FILE` writes.
func heredocTarget(words []string) string {
	for i, w := range words {
		switch {
		case (w == ">" || w == ">>") && i+1 < len(words):
			return words[i+1]
		case strings.HasPrefix(w, ">") && len(w) > 1:
			return strings.TrimLeft(w, ">")
		case w == "tee" && i+1 < len(words):
			return words[i+1]
		}
	}
	return ""
}

// isArrayStart tells `NAME=` or `NAME+=` before a bash array's (.
func isArrayStart(w string) bool {
	name := strings.TrimSuffix(strings.TrimSuffix(w, "="), "+")
	return strings.HasSuffix(w, "=") && isShellName(name)
}

// arrayAssignment records `NAME=( … )` and `NAME+=( … )` and reports
// whether words were one.
func arrayAssignment(words []string, arrays map[string][]string) bool {
	if len(words) < 3 || words[1] != "(" || words[len(words)-1] != ")" || !isArrayStart(words[0]) {
		return false
	}
	name := strings.TrimSuffix(strings.TrimSuffix(words[0], "="), "+")
	elems := words[2 : len(words)-1]
	if strings.HasSuffix(words[0], "+=") {
		arrays[name] = append(arrays[name], elems...)
	} else {
		arrays[name] = append([]string(nil), elems...)
	}
	return true
}

// assignments records a command of only NAME=value words (export's too)
// and reports whether it was one.
func assignments(words []string, vars map[string]string) bool {
	w := words
	if len(w) > 0 && w[0] == "export" {
		w = w[1:]
	}
	if len(w) == 0 {
		return len(words) > 0
	}
	for _, x := range w {
		k, _, ok := strings.Cut(x, "=")
		if !ok || !isShellName(k) {
			return false
		}
	}
	for _, x := range w {
		k, v, _ := strings.Cut(x, "=")
		vars[k] = v
	}
	return true
}

func isShellName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// maxExpansion bounds the bytes a script's variables may expand to, in
// all its words together: `A=$A$A` doubles a value at each line, so a few
// hundred bytes of script would otherwise make gigabytes.
const maxExpansion = 1 << 20

// overBudget is a script past a bound no launch script reaches: said as
// it is, never read as another kind of config instead.
type overBudget struct{ error }

func (o overBudget) Unwrap() error { return o.error }

// expander replaces $NAME, ${NAME} and ${NAME:-default} of the variables
// the script assigned (others stay as written), within maxExpansion.
type expander struct {
	vars map[string]string
	made int // bytes the expansions have written so far
}

func (x *expander) words(words []string) ([]string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		var err error
		if out[i], err = x.word(w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// expandArrays replaces a word ${NAME[@]} (or [*]) by the array's
// elements, each split at blanks as an unquoted expansion splits them.
func expandArrays(words []string, arrays map[string][]string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, "${") && (strings.HasSuffix(w, "[@]}") || strings.HasSuffix(w, "[*]}")) {
			if elems, ok := arrays[w[2:len(w)-4]]; ok {
				for _, e := range elems {
					out = append(out, strings.Fields(e)...)
				}
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

func (x *expander) word(w string) (string, error) {
	if !strings.Contains(w, "$") {
		return w, nil
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] != '$' || i+1 >= len(w) {
			b.WriteByte(w[i])
			continue
		}
		name, def, n := varRef(w[i+1:])
		if n == 0 {
			b.WriteByte('$')
			continue
		}
		v, ok := x.vars[name]
		switch {
		case ok && v != "":
		case def != nil:
			v = *def
		default:
			v = w[i : i+1+n]
		}
		if x.made += len(v); x.made > maxExpansion {
			return "", overBudget{fmt.Errorf("script: expanding $%s makes the script's words more than %d bytes, the most a launch script's variables may expand to", name, maxExpansion)}
		}
		b.WriteString(v)
		i += n
	}
	return b.String(), nil
}

// varRef reads NAME, {NAME} or {NAME:-default} after a $: the name, the
// default and how many bytes it took (0 when none).
func varRef(s string) (string, *string, int) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", nil, 0
		}
		body := s[1:end]
		if k, d, ok := strings.Cut(body, ":-"); ok && isShellName(k) {
			return k, &d, end + 1
		}
		if !isShellName(body) {
			return "", nil, 0
		}
		return body, nil, end + 1
	}
	n := 0
	for n < len(s) && isShellName(s[:n+1]) {
		n++
	}
	return s[:n], nil, n
}

// dockerImages are the images whose entrypoint is the program the
// arguments after the image go to.
var dockerImages = []struct{ image, program string }{
	{"vllm/vllm-openai", "vllm serve"},
	{"llama.cpp:server", "llama-server"},
	{"llama.cpp:full", ""},
}

// dockerValueFlags are `docker run` options followed by a value.
var dockerValueFlags = setOf("p", "publish", "v", "volume", "e", "env", "name", "gpus", "network", "net", "shm-size", "ipc",
	"mount", "runtime", "entrypoint", "w", "workdir", "u", "user", "env-file", "device", "ulimit", "cpus", "memory", "m", "label",
	"platform", "pull", "restart", "hostname", "security-opt", "cap-add", "group-add", "add-host")

// unwrapDocker turns `docker run [options] IMAGE ARGS` (or podman's) into
// the command the container runs.
func unwrapDocker(words []string) []string {
	if len(words) < 3 || (words[0] != "docker" && words[0] != "podman") || words[1] != "run" {
		return words
	}
	i := 2
	for i < len(words) && strings.HasPrefix(words[i], "-") {
		name := strings.TrimLeft(words[i], "-")
		if !strings.Contains(name, "=") && dockerValueFlags[name] {
			i++
		}
		i++
	}
	if i >= len(words) {
		return words
	}
	image, args := words[i], words[i+1:]
	for _, d := range dockerImages {
		if strings.Contains(image, d.image) && d.program != "" {
			return append(strings.Fields(d.program), args...)
		}
	}
	return args
}

// launchCommand is the first of a script's commands that serves or
// trains, with its kind (empty when none does).
func (sc script) launchCommand() ([]string, Kind, bool) {
	for _, words := range sc.commands {
		w := unwrapDocker(dropRedirections(words))
		if k := serveKind(w); k != "" {
			return w, k, false
		}
		if isVerlCommand(w) {
			return w, KindVerl, true
		}
		if isTrainerCommand(w) {
			return w, KindHFArgs, true
		}
	}
	return nil, "", false
}

// dropRedirections drops `> log`, `2>&1`, `< in` and their targets.
func dropRedirections(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := strings.TrimLeft(words[i], "0123456789")
		if strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") {
			if w == ">" || w == ">>" || w == "<" {
				i++
			}
			continue
		}
		out = append(out, words[i])
	}
	return out
}
