package vram

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Size caps for the files a plan reads. Each is far above the largest real
// file of its kind and far below what would hurt a notebook:
//   - a plan file is a few hundred bytes;
//   - config.json of the largest multimodal checkpoints is under 100 KB;
//   - model.safetensors.index.json of DeepSeek-V3 (91,991 tensors) is 8.9 MB;
//   - a safetensors header is capped at 100 MB by the format's reference
//     reader (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
const (
	MaxPlanFile        = 1 << 20
	MaxConfigFile      = 4 << 20
	MaxIndexFile       = 64 << 20
	MaxSafetensorsHead = 100 << 20
)

// readFile reads a regular file of at most limit bytes. Special files
// (devices, pipes, sockets) and directories are refused before they are
// opened, so /dev/zero or a FIFO can neither grow memory nor block.
func readFile(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(path, st, limit); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, path, limit)
}

// readFileIn reads name inside the folder root: absolute names, ".." and
// symbolic links that leave the folder are refused (os.Root).
func readFileIn(root *os.Root, name string, limit int64) ([]byte, error) {
	st, err := root.Stat(name)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	if err := regular(name, st, limit); err != nil {
		return nil, err
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	defer f.Close()
	return readAtMost(f, name, limit)
}

// openIn opens a regular file inside root for streaming (safetensors shards
// are read only as far as their header).
func openIn(root *os.Root, name string) (*os.File, error) {
	st, err := root.Stat(name)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	if err := regular(name, st, -1); err != nil {
		return nil, err
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	return f, nil
}

func regular(name string, st fs.FileInfo, limit int64) error {
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

func readAtMost(r io.Reader, name string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than the %d bytes this kind of file may have", name, limit)
	}
	return b, nil
}

// insideErr explains os.Root's refusal of a path that leaves its folder.
func insideErr(root *os.Root, name string, err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") || filepath.IsAbs(name) {
		return fmt.Errorf("%q must name a file inside %s (no absolute paths, \"..\" or links that leave it)", name, root.Name())
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", filepath.Join(root.Name(), name), pe.Err)
	}
	return err
}
