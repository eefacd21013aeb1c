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

// Schedule is a pipeline schedule (Parallel.PPSchedule), as
// torch.distributed.pipelining names its classes.
type Schedule string

// The pipeline schedules a plan may name.
const (
	Schedule1F1B            Schedule = "1f1b"             // Schedule1F1B (the default)
	ScheduleInterleaved1F1B Schedule = "interleaved_1f1b" // ScheduleInterleaved1F1B over VirtualStages looped stages
	ScheduleGPipe           Schedule = "gpipe"            // ScheduleGPipe: every microbatch's forward first
	ScheduleZBV             Schedule = "zbv"              // ScheduleZBVZeroBubble: two stages per rank in a V
	ScheduleInterleavedZB   Schedule = "interleaved_zb"   // ScheduleInterleavedZeroBubble (ZB-1P, looped)
	ScheduleDualPipeV       Schedule = "dualpipev"        // ScheduleDualPipeV: ZB-V's V, forwards paired with backwards
)

// Schedules lists them in the order error messages give them.
var Schedules = []Schedule{Schedule1F1B, ScheduleInterleaved1F1B, ScheduleGPipe, ScheduleZBV, ScheduleInterleavedZB, ScheduleDualPipeV}

// interleaved: the schedule loops VirtualStages stages over the ranks.
func (s Schedule) interleaved() bool {
	return s == ScheduleInterleaved1F1B || s == ScheduleInterleavedZB
}

// vShape: the schedule places two stages on each rank in a V.
func (s Schedule) vShape() bool { return s == ScheduleZBV || s == ScheduleDualPipeV }

// splitBackward: the schedule splits each backward into input and weight
// gradients (zero bubble).
func (s Schedule) splitBackward() bool { return s.vShape() || s == ScheduleInterleavedZB }
