package vram

// Framework names the training framework whose loop, defaults and words a
// plan follows (Training.Framework; vram/README.md's "Framework defaults"
// lists its defaults, vocabulary.go its checkpointing words).
type Framework string

// The frameworks a training plan may name.
const (
	FrameworkPlainPyTorch Framework = "plain_pytorch" // a hand-written loop: the engine's own defaults
	FrameworkHFTrainer    Framework = "hf_trainer"
	FrameworkAccelerate   Framework = "accelerate"
	FrameworkDeepSpeed    Framework = "deepspeed"
	FrameworkLitGPT       Framework = "litgpt"
	FrameworkTorchtune    Framework = "torchtune"
	FrameworkTorchtitan   Framework = "torchtitan"
	FrameworkMegatron     Framework = "megatron"
)

// Frameworks lists them in the order error messages give them.
var Frameworks = []Framework{FrameworkPlainPyTorch, FrameworkAccelerate, FrameworkHFTrainer, FrameworkLitGPT,
	FrameworkTorchtune, FrameworkTorchtitan, FrameworkDeepSpeed, FrameworkMegatron}

// Checkpointing is the engine's activation checkpointing setting
// (Training.Checkpointing), resolved once from the framework's word for it
// (vocabulary.go).
type Checkpointing string

// The engine's checkpointing settings.
const (
	CheckpointNone      Checkpointing = "none"
	CheckpointFull      Checkpointing = "full"      // each block's input kept, the block recomputed
	CheckpointSelective Checkpointing = "selective" // the attention internals recomputed (Korthikanti et al. 2022 §4.2)
	CheckpointOp        Checkpointing = "op"        // torchtitan's op-level selective checkpointing
)
