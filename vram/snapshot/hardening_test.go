package snapshot

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// pickler writes protocol-4 pickles for the hostile shapes below.
type pickler struct {
	b    bytes.Buffer
	memo uint32
}

func newPickler() *pickler {
	p := &pickler{}
	p.b.WriteString("\x80\x04")
	return p
}

func (p *pickler) op(s string) *pickler { p.b.WriteString(s); return p }

func (p *pickler) str(s string) *pickler {
	p.b.WriteByte(0x8c)
	p.b.WriteByte(byte(len(s)))
	p.b.WriteString(s)
	return p
}

func (p *pickler) int(n uint8) *pickler { p.b.WriteByte('K'); p.b.WriteByte(n); return p }

// define memoizes the top of the stack, pops it and returns its memo index.
func (p *pickler) define() uint32 { p.b.WriteString("\x940"); p.memo++; return p.memo - 1 }

func (p *pickler) get(i uint32) *pickler {
	p.b.WriteByte('j')
	binary.Write(&p.b, binary.LittleEndian, i)
	return p
}

func (p *pickler) bytes() []byte { p.b.WriteByte('.'); return p.b.Bytes() }

// sharedMemo is N segments sharing one list of N blocks, all sharing one
// list of N frames: a few KB that a tree walk turns into N³ frames.
func sharedMemo(n int) []byte {
	p := newPickler()
	p.op("}(").str("filename").str("train.py").str("line").int(1).str("name").str("f").op("u")
	frame := p.define()
	p.op("](")
	for i := 0; i < n; i++ {
		p.get(frame)
	}
	p.op("e")
	frames := p.define()
	p.op("}(").str("address").int(0).str("size").int(1).str("state").str("active_allocated").str("frames").get(frames).op("u")
	block := p.define()
	p.op("](")
	for i := 0; i < n; i++ {
		p.get(block)
	}
	p.op("e")
	blocks := p.define()
	p.op("}(").str("address").int(0).str("total_size").int(1).str("blocks").get(blocks).op("u")
	seg := p.define()
	p.op("}(").str("segments").op("](")
	for i := 0; i < n; i++ {
		p.get(seg)
	}
	p.op("e").str("device_traces").op("]u")
	return p.bytes()
}

// TestHostileSnapshots: each shape an audit found slow or greedy in the
// pickle reader is now a clear error within the readers' budget.
func TestHostileSnapshots(t *testing.T) {
	long4 := func(n int) []byte {
		b := []byte("\x80\x04\x8b")
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		return append(append(b, bytes.Repeat([]byte{0x7f}, n)...), '.')
	}
	noneFlood := func(chunks int) []byte {
		var b bytes.Buffer
		b.WriteString("\x80\x04]")
		for i := 0; i < chunks; i++ {
			b.WriteByte('(')
			b.Write(bytes.Repeat([]byte{'N'}, 65000))
			b.WriteByte('e')
		}
		b.WriteByte('.')
		return b.Bytes()
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"shared memo, N³ frames", sharedMemo(1000), "shared so often"},
		{"LONG4 of 300 KB", long4(300 << 10), "fit in 64 bits"},
		{"LONG4 of 1 MB", long4(1 << 20), "fit in 64 bits"},
		{"LONG1 of 200 bytes", append([]byte("\x80\x02\x8a\xc8"), append(bytes.Repeat([]byte{1}, 200), '.')...), "fit in 64 bits"},
		{"protocol-0 long of 1M digits", []byte("L" + strings.Repeat("9", 1<<20) + "L\n."), "fit in 64 bits"},
		{"protocol-0 int of 1M digits", []byte("I" + strings.Repeat("9", 1<<20) + "\n."), "fit in 64 bits"},
		{"17 MB of None between MARK and APPENDS", noneFlood(maxValues/65000 + 1), "more than 16777216 values"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			budget.Check(t, len(c.data), func() { _, err = Decode(c.data) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestSharedMemoReadOnce: a small shared snapshot reads, its shared lists
// are read once and shared, not copied.
func TestSharedMemoReadOnce(t *testing.T) {
	data := sharedMemo(50)
	var s *Snapshot
	var err error
	budget.Check(t, len(data), func() { s, err = Decode(data) })
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Segments) != 50 || len(s.Segments[49].Blocks) != 50 || len(s.Segments[49].Blocks[49].Frames) != 50 {
		t.Fatalf("read %d segments", len(s.Segments))
	}
	if &s.Segments[0].Blocks[0] != &s.Segments[1].Blocks[0] || &s.Segments[0].Blocks[0].Frames[0] != &s.Segments[0].Blocks[1].Frames[0] {
		t.Error("the shared lists were copied, not shared")
	}
	if f := s.Segments[3].Blocks[7].Frames[9]; f.Filename != "train.py" || f.Line != 1 || f.Name != "f" {
		t.Errorf("frame %+v", f)
	}
}

// TestPickleIntegers: every integer opcode, at its edges, reads as Python
// reads it.
func TestPickleIntegers(t *testing.T) {
	for _, c := range []struct {
		pickle string
		want   any
	}{
		{"K\xff.", int64(255)},
		{"M\xff\xff.", int64(65535)},
		{"J\xff\xff\xff\xff.", int64(-1)},
		{"\x80\x02\x8a\x00.", int64(0)},
		{"\x80\x02\x8a\x01\xff.", int64(-1)},
		{"\x80\x02\x8a\x02\x00\x80.", int64(-32768)},
		{"\x80\x02\x8a\x03\x00\x80\x00.", int64(32768)},
		{"\x80\x02\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f.", int64(1<<63 - 1)},
		{"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00.", uint64(1 << 63)},
		{"\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.", int64(-1 << 63)},
		{"I-12\n.", int64(-12)},
		{"I01\n.", true},
		{"L18446744073709551615L\n.", uint64(1<<64 - 1)},
	} {
		v, err := decodePickle([]byte(c.pickle))
		if err != nil || v != c.want {
			t.Errorf("%q: %v (%T), %v; want %v (%T)", c.pickle, v, v, err, c.want, c.want)
		}
	}
	for _, bad := range []string{"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", "L18446744073709551616L\n.", "\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff."} {
		if _, err := decodePickle([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestPickleStrings: protocol 0's escaped text reads as Python reads it.
func TestPickleStrings(t *testing.T) {
	for _, c := range []struct{ pickle, want string }{
		{"S'it\\'s'\n.", "it's"},
		{"S'a\\x41\\101\\n'\n.", "aAA\n"},
		{"S\"quote\"\n.", "quote"},
		{"Vcaf\xe9 \\u4e2d\\\\u0041\n.", "café 中\\\\u0041"},
		{"V\\U0001F600\n.", "😀"},
		{"\x80\x04\x8c\x03\xe4\xb8\xad.", "中"},
	} {
		v, err := decodePickle([]byte(c.pickle))
		if err != nil || v != c.want {
			t.Errorf("%q: %q, %v; want %q", c.pickle, v, err, c.want)
		}
	}
	for _, bad := range []string{"S'unterminated\n.", "Sno quotes\n.", "V\\u12\n.", "S'\\x4'\n."} {
		if _, err := decodePickle([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestReadFileRefusesFIFO: a FIFO named as a snapshot is refused at once.
func TestReadFileRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "run.pickle")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ReadFile(fifo): %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile(fifo) blocked")
	}
}
