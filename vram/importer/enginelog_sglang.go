package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vramlab/vramlab/vram/internal/pyconf"
)

// SGLang prints the server's arguments once at startup, after it has
// resolved them (its own picks of mem_fraction_static, chunked_prefill_size
// and the like are filled in):
//
//	0.5.3:  logger.info(f"{server_args=}") (srt/entrypoints/engine.py:768, in
//	        _launch_subprocesses; :127 for the Engine API): the dataclass's
//	        repr, "server_args=ServerArgs(model_path='…', tokenizer_path=…, …)".
//	0.5.23: logger.info(f"server_args={_server_args_for_logging(server_args)}")
//	        (srt/entrypoints/engine.py:1185, in _launch_subprocesses; :311 for
//	        the Engine API): ServerArgs.resolved_dict() (srt/server_args.py:316),
//	        a dict, "server_args={'model_path': '…', …}", nested records as dicts.
//
// Both go through configure_logger's "[%(asctime)s] %(message)s" (0.5.3
// srt/utils/common.py:1089, 0.5.23 srt/utils/common.py:2630).
//
// What is read. The fields whose value differs from the release's default
// (sglangDefaults: the repr against 0.5.3's, the dict against 0.5.23's)
// become the launch_server command line they stand for, --field-name value,
// which the importer's own SGLang handling (importSGLang, sglangFlags) then
// reads as it reads any command line: nothing here maps a field to the
// plan. Only the fields that handling knows are kept (sglangLogFlags): those
// it reads (tp_size, mem_fraction_static, kv_cache_dtype,
// max_running_requests, chunked_prefill_size, cuda_graph_max_bs,
// max_prefill_tokens, enable_multimodal, max_mamba_cache_size,
// mamba_ssm_dtype, the speculative_* fields of sglang.speculative: its
// algorithm as SGLang resolved it, EAGLE for NEXTN, and the draft path it
// filled with the model's own for DeepSeek-V3) and those it gives a reason
// for not modelling
// (sglangNotModelled: the fields that change the weights on a GPU or its
// pools). The rest, several hundred fields at 0.5.23 (ports, parsers,
// kernels' backends, logging, scheduling policies, the tokenizer, the
// SGLang-picked random seed and device), do not change the weights or the
// pools a plan predicts and are passed over without a word; so are
// 0.5.3's cuda_graph_bs, which SGLang derives from cuda_graph_max_bs (or
// cuda_graph_max_bs from it, server_args.py:632-635) and which the line
// carries, and 0.5.23's cuda_graph_config, whose decode max_bs only enters
// the default fraction the line already gives resolved.
//
// The values are the ones SGLang ran with, its resolved picks included:
// a log of a launch that gave no --mem-fraction-static names the fraction
// SGLang chose, and the plan takes it as given.
//
// Budgets: the line is at most MaxLogLine; pyconf reads it within its own
// (tokens, bracket depth 64, evaluations), a value kept is at most
// maxServerArgValue bytes. A key given twice keeps its last value, as
// Python's dict does.

// maxServerArgValue is the longest value of a field kept (a path, a JSON).
const maxServerArgValue = 4096

// The releases whose defaults a line is read against, by its form.
const (
	sglangReprRelease = "0.5.3"
	sglangDictRelease = "0.5.23"
)

// sglangDefaults are the defaults of the fields a line is read for, as each
// release declares them (0.5.3: srt/server_args.py, the ServerArgs
// dataclass; 0.5.23: srt/arg_groups/fields/*.py), or, at 0.5.23, the
// fallback resolved_dict prints for a field left unset (resolution_result,
// srt/arg_groups/overrides.py:178-191; arg_utils.py:193-201). A field a
// release does not have is compared with None.
var sglangDefaults = map[string]map[string]any{
	sglangReprRelease: {
		"tp_size":                      int64(1),     // server_args.py:205
		"mem_fraction_static":          nil,          // :186
		"kv_cache_dtype":               "auto",       // :182
		"max_running_requests":         nil,          // :187
		"chunked_prefill_size":         nil,          // :190
		"cuda_graph_max_bs":            nil,          // :377
		"max_prefill_tokens":           int64(16384), // :191
		"enable_multimodal":            nil,          // :167
		"max_mamba_cache_size":         nil,          // :344
		"mamba_ssm_dtype":              "float32",    // :345
		"dp_size":                      int64(1),     // :256
		"enable_dp_attention":          false,        // :393
		"context_length":               nil,          // :165
		"quantization":                 nil,          // :180
		"speculative_algorithm":        nil,          // :294
		"speculative_draft_model_path": nil,          // :295
		"speculative_num_steps":        nil,          // :297
		"speculative_eagle_topk":       nil,          // :298
		"speculative_num_draft_tokens": nil,          // :299
		"speculative_token_map":        nil,          // :302
		"pp_size":                      int64(1),     // :206
		"max_total_tokens":             nil,          // :189
		"dtype":                        "auto",       // :179
		"ep_size":                      int64(1),     // :314
		"cpu_offload_gb":               int64(0),     // :369
		"enable_lora":                  nil,          // :272
		"lora_paths":                   nil,          // :275
		"max_lora_rank":                nil,          // :273
		"json_model_override_args":     "{}",         // :268
		"swa_full_tokens_ratio":        0.8,          // :199
	},
	sglangDictRelease: {
		"tp_size":                              int64(1),     // arg_groups/fields/parallel.py:45
		"mem_fraction_static":                  nil,          // schedule.py:27
		"kv_cache_dtype":                       "auto",       // model.py:197
		"max_running_requests":                 nil,          // schedule.py:31
		"chunked_prefill_size":                 nil,          // schedule.py:52
		"max_prefill_tokens":                   int64(16384), // schedule.py:71
		"enable_multimodal":                    nil,          // mm.py:28
		"max_mamba_cache_size":                 nil,          // schedule.py:216
		"mamba_ssm_dtype":                      nil,          // exec_.py:490
		"dp_size":                              int64(1),     // parallel.py:73
		"attn_dp_size":                         int64(1),     // parallel.py:81
		"enable_dp_attention":                  false,        // parallel.py:194 (resolved_dict: attn_dp_size > 1, server_args.py:332)
		"context_length":                       nil,          // model.py:110
		"quantization":                         nil,          // model.py:177
		"speculative_algorithm":                nil,          // spec.py:31
		"speculative_draft_model_path":         nil,          // spec.py:36
		"speculative_num_steps":                nil,          // spec.py:58
		"speculative_eagle_topk":               nil,          // spec.py:62
		"speculative_num_draft_tokens":         nil,          // spec.py:66
		"speculative_token_map":                nil,          // spec.py:125
		"speculative_draft_kv_cache_dtype":     nil,          // spec.py:151
		"speculative_draft_model_quantization": nil,          // spec.py:216
		"enable_multi_layer_eagle":             false,        // spec.py:230
		"pp_size":                              int64(1),     // parallel.py:59
		"max_total_tokens":                     nil,          // schedule.py:39
		"dtype":                                "auto",       // model.py:160
		"ep_size":                              int64(1),     // parallel.py:281
		"cpu_offload_gb":                       int64(0),     // exec_.py:1068
		"enable_lora":                          nil,          // lora.py:34
		"lora_paths":                           nil,          // lora.py:54
		"max_lora_rank":                        nil,          // lora.py:42
		"json_model_override_args":             "{}",         // model.py:152
		"swa_full_tokens_ratio":                0.8,          // schedule.py:150, its fallback 0.8 (:160) when unset
		"mamba_full_memory_ratio":              0.9,          // schedule.py:220, its fallback 0.9 (:225) when unset
	},
}

// sglangDerived are fields passed over though the SGLang handling knows
// them: the line carries what they are derived from, or derived into.
var sglangDerived = map[string]bool{"cuda_graph_bs": true}

// sglangLogFlags are the launch_server flags a line's fields are kept for:
// those sglangFlags reads (asked of a reader with no flags given) and
// those sglangNotModelled explains.
var sglangLogFlags = sync.OnceValue(func() map[string]bool {
	f := newFlagReader(KindSGLang, flagSet{vals: map[string]string{}, at: map[string]int{}}, &Imported{})
	_, _ = sglangFlags(f) // no flag given: nothing read, nothing refused
	known := maps.Clone(f.asked)
	for k := range sglangNotModelled {
		known[k] = true
	}
	return known
})

// sglangServerArgs turns SGLang's server_args (the repr or the dict, as
// logged) into the launch_server command line it stands for, and names
// the release whose defaults it was read against.
func sglangServerArgs(text string) (string, string, error) {
	m, err := pyconf.Parse([]byte("def f():\n    return " + text + "\n"))
	if err != nil {
		return "", "", fmt.Errorf("server_args: %v", err)
	}
	v, _, err := m.Run("f")
	if err != nil {
		return "", "", fmt.Errorf("server_args: %v", err)
	}
	fields, ok := v.(map[string]any)
	if !ok {
		return "", "", errors.New("server_args: not a ServerArgs(…) nor a dict")
	}
	release := sglangDictRelease
	if class, isCall := fields["_class"]; isCall {
		if class != "ServerArgs" {
			return "", "", fmt.Errorf("server_args: a %v(…), not ServerArgs(…)", class)
		}
		if fields["_args"] != nil {
			return "", "", errors.New("server_args: ServerArgs(…) with positional arguments; SGLang prints its fields by name")
		}
		release = sglangReprRelease
	}
	model, ok := fields["model_path"].(string)
	switch {
	case !ok || strings.TrimSpace(model) == "":
		return "", "", errors.New("server_args: no model_path")
	case len(model) > maxServerArgValue:
		return "", "", fmt.Errorf("server_args: model_path is %d bytes, more than the %d a path is read to", len(model), maxServerArgValue)
	}
	out := []string{"python", "-m", "sglang.launch_server", "--model-path", shellQuote(model)}
	defaults := sglangDefaults[release]
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		flag := "--" + normFlag(k)
		if k == "model_path" || sglangDerived[k] || !sglangLogFlags()[flag[2:]] || sglangSame(fields[k], defaults[k]) {
			continue
		}
		switch x := fields[k].(type) {
		case nil: // None where the default is set: no flag says it
		case bool:
			if x {
				out = append(out, flag)
			} else {
				out = append(out, flag, "false")
			}
		default:
			s, err := sglangValue(x)
			if err != nil {
				return "", "", fmt.Errorf("server_args: %s: %v", k, err)
			}
			out = append(out, flag, shellQuote(s))
		}
	}
	return strings.Join(out, " "), release, nil
}

// sglangSame tells a field's value from its default: numbers by value, a
// False as the None of a flag that is off unless given.
func sglangSame(v, def any) bool {
	if f, ok := pyconf.Float(v); ok {
		d, ok := pyconf.Float(def)
		return ok && f == d
	}
	if v == false && def == nil || v == nil && def == false {
		return true
	}
	return reflect.DeepEqual(v, def)
}

// sglangValue writes a value as its flag takes it: a number or a string as
// is, a list or a dict as JSON (what SGLang's JSON-typed flags parse).
func sglangValue(v any) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return "", err
		}
		s = string(b)
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > maxServerArgValue {
		return "", fmt.Errorf("%d bytes, more than the %d a value is read to", len(s), maxServerArgValue)
	}
	return s, nil
}
