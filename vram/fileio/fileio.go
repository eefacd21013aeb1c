// Package fileio opens the files a user names — plans, configs, checkpoint
// headers, GGUF files, memory snapshots, NVML samples — so that none can
// block or grow without bound: each is looked at before it is opened, and
// only a regular file of at most its kind's size is read.
//
//	b, err := fileio.Read("config.json", 4<<20)    // at most 4 MiB
//	f, st, err := fileio.Open("model.gguf", -1)     // any size, streamed
package fileio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Open opens path for reading when it is a regular file of at most limit
// bytes (limit < 0: any size). A directory, device, pipe or socket is
// refused before it is opened; the open itself does not block (a FIFO put
// in its place in between opens at once and is then refused), and the file
// opened must be the one looked at.
func Open(path string, limit int64) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := Regular(path, st, limit); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	return checkOpened(f, path, st, limit)
}

// OpenIn is Open for name inside root (os.Root: absolute names, ".." and
// links that leave the folder are refused).
func OpenIn(root *os.Root, name string, limit int64) (*os.File, fs.FileInfo, error) {
	st, err := root.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if err := Regular(name, st, limit); err != nil {
		return nil, nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	return checkOpened(f, name, st, limit)
}

func checkOpened(f *os.File, name string, before fs.FileInfo, limit int64) (*os.File, fs.FileInfo, error) {
	st, err := f.Stat()
	if err == nil {
		err = Regular(name, st, limit)
	}
	if err == nil && !os.SameFile(before, st) {
		err = fmt.Errorf("%s changed while it was opened", name)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// Read reads the regular file path of at most limit bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, _, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, path, limit)
}

// ReadIn reads name inside root, a regular file of at most limit bytes.
func ReadIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, _, err := OpenIn(root, name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAtMost(f, name, limit)
}

// Regular refuses what is not a regular file of at most limit bytes.
func Regular(name string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		kind := "a special file"
		if st.IsDir() {
			kind = "a directory"
		}
		return fmt.Errorf("%s is %s, not a regular file", name, kind)
	}
	if limit >= 0 && st.Size() > limit {
		return fmt.Errorf("%s is %d bytes, more than the %d this kind of file may have", name, st.Size(), limit)
	}
	return nil
}

// ReadAtMost reads r to its end, refusing more than limit bytes (a file
// that grew since it was looked at).
func ReadAtMost(r io.Reader, name string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) {
			return nil, fmt.Errorf("%s is not a regular file", name)
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than the %d bytes this kind of file may have", name, limit)
	}
	return b, nil
}

// ReadN reads exactly n bytes of r, allocating as they arrive rather than
// all n up front: a header that declares a length its file does not have
// costs what the file holds, not what it claims. Fewer bytes than n is
// io.ErrUnexpectedEOF (io.EOF when none).
func ReadN(r io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("a length of %d bytes", n)
	}
	const chunk = 64 << 10
	if n <= chunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	got, err := io.Copy(&buf, io.LimitReader(r, n))
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
		if got == 0 {
			err = io.EOF
		}
	}
	return buf.Bytes(), err
}
