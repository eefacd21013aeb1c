package vram

import (
	"fmt"
	"strconv"
	"strings"
)

// The caching allocator's settings as a run sets them: the
// PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) string, or the one the
// framework's launcher exports.

// allocKeys are PyTorch's allocator options (c10/core/AllocatorConfig.cpp,
// c10/cuda/CUDAAllocatorConfig.cpp); the replay models the first two.
var allocKeys = []string{"expandable_segments", "max_split_size_mb", "garbage_collection_threshold",
	"roundup_power2_divisions", "pinned_use_cuda_host_register", "pinned_num_register_threads",
	"release_lock_on_cudamalloc", "pinned_use_background_threads", "backend"}

// parseAllocConf reads an allocator configuration string such as
// "expandable_segments:True,max_split_size_mb:512". Options the replay does
// not model are returned in ignored.
func parseAllocConf(s string) (c AllocatorConfig, ignored []string, err error) {
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return c, nil, fmt.Errorf("alloc_conf %q: want key:value pairs separated by commas, as PYTORCH_CUDA_ALLOC_CONF takes them", kv)
		}
		switch k {
		case "expandable_segments":
			switch v {
			case "True", "true":
				c.ExpandableSegments = true
			case "False", "false":
				c.ExpandableSegments = false
			default:
				return c, nil, fmt.Errorf("alloc_conf expandable_segments must be True or False, got %q", v)
			}
		case "max_split_size_mb":
			mb, err := strconv.Atoi(v)
			if err != nil || mb <= 20 || mb > 1<<30 {
				return c, nil, fmt.Errorf("alloc_conf max_split_size_mb must be a whole number of MiB above 20 (PyTorch's kLargeBuffer), got %q", v)
			}
			c.MaxSplitSize = Bytes(mb) * MiB
		default:
			if err := oneOf("alloc_conf option", k, allocKeys...); err != nil {
				return c, nil, err
			}
			ignored = append(ignored, k)
		}
	}
	return c, ignored, nil
}

// resolveAllocConf sets the allocator the replay runs the plan with: the
// plan's alloc_conf, else its launcher's. torchtitan's run_train.sh exports
// expandable_segments:True (since a5e57e4a9, 2024-10-22, "Use expandable
// segments in run_llama_train.sh"; run_train.sh:43 at the pinned snapshot).
func (r *resolved) resolveAllocConf() error {
	s := r.AllocConf
	if s == "" && r.Framework == FrameworkTorchtitan {
		s = "expandable_segments:True"
	}
	c, ignored, err := parseAllocConf(s)
	if err != nil {
		return err
	}
	for _, k := range ignored {
		r.notes = append(r.notes, fmt.Sprintf("alloc_conf %s does not change the replay (not modelled)", k))
	}
	r.alloc = c
	return nil
}
