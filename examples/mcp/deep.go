package main

import (
	"bufio"
	"bytes"
	"io"
)

// The official SDK refuses a message nested deeper than 1000 levels by
// ending the session (go-sdk internal/json, defaultMaxDepth). The readers
// refuse far shallower nesting with the CLI's error, naming the field, so
// the server cuts what lies deeper than maxNesting to a string before the
// SDK sees it: the message stays valid JSON, and the caller gets the
// reader's error instead of a closed session.
const maxNesting = 900

// cutDeep copies newline-framed messages from r, each container nested
// deeper than maxNesting replaced by a string; a line longer than limit
// passes as it is (the SDK refuses it by its length).
func cutDeep(r io.Reader, limit int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br, limit)
			if len(line) > 0 {
				if _, werr := pw.Write(shallow(line)); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// readLine reads up to and including a newline, at most limit+1 bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull || len(line) > limit {
			if err == bufio.ErrBufferFull {
				err = nil
			}
			return line, err
		}
	}
}

// shallow is msg with every object or array nested deeper than
// maxNesting replaced by the string "(nested too deep)".
func shallow(msg []byte) []byte {
	var out bytes.Buffer
	depth, skipFrom := 0, -1
	inString, escaped := false, false
	for _, c := range msg {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxNesting && skipFrom < 0 {
				skipFrom = depth
				out.WriteString(`"(nested too deep)"`)
			}
		case c == '}' || c == ']':
			depth--
			if skipFrom >= 0 && depth < skipFrom {
				skipFrom = -1
				continue
			}
		}
		if skipFrom < 0 {
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}
