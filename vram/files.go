package vram

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vramlab/vramlab/vram/fileio"
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
	return fileio.Read(path, limit)
}

// readFileIn reads name inside the folder root: absolute names, ".." and
// symbolic links that leave the folder are refused (os.Root).
func readFileIn(root *os.Root, name string, limit int64) ([]byte, error) {
	b, err := fileio.ReadIn(root, name, limit)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	return b, nil
}

// openIn opens a regular file inside root for streaming (safetensors shards
// are read only as far as their header).
func openIn(root *os.Root, name string) (*os.File, error) {
	f, _, err := fileio.OpenIn(root, name, -1)
	if err != nil {
		return nil, insideErr(root, name, err)
	}
	return f, nil
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
