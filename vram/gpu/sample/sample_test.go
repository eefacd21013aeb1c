package sample

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramlab/vramlab/vram"
	"github.com/vramlab/vramlab/vram/fileio/budget"
)

// rising reads 1, 2, 3 … GiB; it fails after fail readings when fail > 0.
type rising struct{ n, fail int }

func (r *rising) Read() (vram.Bytes, vram.Bytes, error) {
	r.n++
	if r.fail > 0 && r.n > r.fail {
		return 0, 0, errors.New("device lost")
	}
	return vram.Bytes(r.n) * vram.GiB, vram.Bytes(r.n) * vram.MiB, nil
}

// TestRecordAndRead: what Record writes, Read reads back, in order,
// with the peak of both columns; a failing read ends Record with its error.
func TestRecordAndRead(t *testing.T) {
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	r := &rising{}
	done := make(chan error)
	go func() { done <- Record(ctx, r, 10*time.Millisecond, &buf) }()
	time.Sleep(60 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ss, err := Read(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) < 2 || len(ss) != r.n {
		t.Fatalf("%d samples for %d readings:\n%s", len(ss), r.n, buf.String())
	}
	for i, s := range ss {
		if s.Device != vram.Bytes(i+1)*vram.GiB || s.Process != vram.Bytes(i+1)*vram.MiB || (i > 0 && s.At < ss[i-1].At) {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	if d, p := Peak(ss); d != vram.Bytes(len(ss))*vram.GiB || p != vram.Bytes(len(ss))*vram.MiB {
		t.Errorf("peak %v / %v", d, p)
	}
	if err := Record(context.Background(), &rising{fail: 2}, 10*time.Millisecond, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Errorf("failing reader: %v", err)
	}
	if err := Record(context.Background(), &rising{}, time.Millisecond, &bytes.Buffer{}); err == nil {
		t.Error("1ms interval accepted")
	}
}

// TestReadSamplesErrors: each malformed file names its line.
func TestReadSamplesErrors(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"empty":      {"", "empty"},
		"no header":  {"1,2,3\n", "header"},
		"fields":     {samplesHeader + "\n1,2\n", "line 2"},
		"negative":   {samplesHeader + "\n1,-2,3\n", "line 2, field 2"},
		"not number": {samplesHeader + "\n0,1,1\nx,1,1\n", "line 3, field 1"},
		"backwards":  {samplesHeader + "\n5,1,1\n4,1,1\n", "backwards"},
		"long line":  {samplesHeader + "\n" + strings.Repeat("1", 2000) + "\n", "longer than"},
		"huge time":  {samplesHeader + "\n9223372036855,1,1\n", "past what a duration holds"},
	} {
		if _, err := Read(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestReadSamplesFile: the file reader refuses a FIFO at once and reads a
// file Record wrote.
func TestReadSamplesFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: %v", err)
		}
	}
	p := filepath.Join(dir, "s.csv")
	if err := os.WriteFile(p, []byte(samplesHeader+"\n0,10,5\n100,20,7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ss, err := ReadFile(p)
	if err != nil || len(ss) != 2 || ss[1].At != 100*time.Millisecond || ss[1].Device != 20 {
		t.Errorf("%+v, %v", ss, err)
	}
}

// FuzzReadSamples: any bytes read to samples or an error within the
// readers' budget; what reads is in order and non-negative.
func FuzzReadSamples(f *testing.F) {
	f.Add([]byte(samplesHeader + "\n0,1,1\n5,2,2\n"))
	f.Add([]byte(samplesHeader + "\n9223372036855,1,1\n"))
	f.Add([]byte(samplesHeader + "\n" + strings.Repeat("1,1,1\n", 1000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ss []Sample
		var err error
		budget.Check(t, len(data), func() { ss, err = Read(bytes.NewReader(data)) })
		if err != nil {
			return
		}
		for i, s := range ss {
			if s.At < 0 || s.Device < 0 || s.Process < 0 || (i > 0 && s.At < ss[i-1].At) {
				t.Fatalf("sample %d: %+v", i, s)
			}
		}
	})
}
