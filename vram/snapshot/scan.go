package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// scan checks a pickle before it is decoded: every opcode is one a memory
// snapshot can use (plain dicts, lists, tuples, strings, numbers, None,
// booleans; pickletools.py lists them with their argument formats), every
// declared length fits in what is left of the file, the stream ends with
// STOP, and no container grows past the limits below. A snapshot holds no
// object of any class, so the opcodes that name a global or call one
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX,
// persistent ids, extensions, out-of-band buffers) are refused: the file is
// something else (a torch.save checkpoint, or a hostile pickle). The decoder
// therefore only ever sees well-formed data whose allocations are bounded by
// the file's size.
//
// To bound the decoder's work too (its dict is a slice searched per key), a
// light model of the pickle machine's stack follows which stack slot holds
// which dict, list or tuple, so the entries each gets are counted.
func scan(data []byte) error {
	s := scanner{data: data, memo: map[uint64]int{}}
	return s.run()
}

// Limits on a snapshot's shape, far above what PyTorch writes (a dict has at
// most a few dozen keys; nesting is six deep) and low enough that decoding
// a hostile file stays linear in its size.
const (
	maxDictEntries = 1 << 12
	maxStack       = 1 << 16
	maxMarks       = 1 << 10
)

type scanner struct {
	data  []byte
	pos   int
	stack []int // per slot: 0 for a scalar, else a container id (dicts > 0 are counted)
	marks []int // stack heights at each MARK
	memo  map[uint64]int
	dicts []int // entries per dict id (id = index + 1)
	proto int
}

func (s *scanner) fail(op byte, format string, args ...any) error {
	return fmt.Errorf("pickle: opcode %q at byte %d: %s", op, s.pos, fmt.Sprintf(format, args...))
}

// take returns the next n bytes, or an error when fewer are left.
func (s *scanner) take(op byte, n uint64) ([]byte, error) {
	if n > uint64(len(s.data)-s.pos) {
		return nil, s.fail(op, "declares %d bytes, %d are left (truncated or corrupt)", n, len(s.data)-s.pos)
	}
	b := s.data[s.pos : s.pos+int(n)]
	s.pos += int(n)
	return b, nil
}

// line returns the bytes up to the next newline (text-protocol arguments).
func (s *scanner) line(op byte) ([]byte, error) {
	i := bytes.IndexByte(s.data[s.pos:], '\n')
	if i < 0 {
		return nil, s.fail(op, "its text argument has no end of line (truncated)")
	}
	b := s.data[s.pos : s.pos+i]
	s.pos += i + 1
	return b, nil
}

// length reads a little-endian length of w bytes.
func (s *scanner) length(op byte, w int) (uint64, error) {
	b, err := s.take(op, uint64(w))
	if err != nil {
		return 0, err
	}
	switch w {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (s *scanner) push(op byte, v int) error {
	if len(s.stack) >= maxStack {
		return s.fail(op, "more than %d values on the stack", maxStack)
	}
	s.stack = append(s.stack, v)
	return nil
}

func (s *scanner) pop(op byte, n int) error {
	if len(s.stack) < n {
		return s.fail(op, "pops %d values from a stack of %d", n, len(s.stack))
	}
	s.stack = s.stack[:len(s.stack)-n]
	return nil
}

// popMark removes everything above the last MARK and the mark, and
// returns how many values there were.
func (s *scanner) popMark(op byte) (int, error) {
	if len(s.marks) == 0 {
		return 0, s.fail(op, "no MARK to pop to")
	}
	m := s.marks[len(s.marks)-1]
	s.marks = s.marks[:len(s.marks)-1]
	if m > len(s.stack) {
		return 0, s.fail(op, "its MARK is above the stack")
	}
	n := len(s.stack) - m
	s.stack = s.stack[:m]
	return n, nil
}

func (s *scanner) newDict() int {
	s.dicts = append(s.dicts, 0)
	return len(s.dicts)
}

// addEntries counts n entries into the dict at the top of the stack.
func (s *scanner) addEntries(op byte, n int) error {
	if len(s.stack) == 0 {
		return s.fail(op, "no dict to set items in")
	}
	if id := s.stack[len(s.stack)-1]; id > 0 {
		s.dicts[id-1] += n
		if s.dicts[id-1] > maxDictEntries {
			return s.fail(op, "a dict with more than %d entries is not a memory snapshot", maxDictEntries)
		}
	}
	return nil
}

// Opcodes (pickletools.py names).
const (
	opMark, opStop, opPop, opPopMark, opDup            = '(', '.', '0', '1', '2'
	opFloat, opInt, opBinInt, opBinInt1, opLong        = 'F', 'I', 'J', 'K', 'L'
	opBinInt2, opNone, opString, opBinString           = 'M', 'N', 'S', 'T'
	opShortBinString, opUnicode, opBinUnicode          = 'U', 'V', 'X'
	opAppend, opAppends, opDict, opEmptyDict           = 'a', 'e', 'd', '}'
	opGet, opBinGet, opLongBinGet, opList, opEmptyList = 'g', 'h', 'j', 'l', ']'
	opPut, opBinPut, opLongBinPut, opSetItem           = 'p', 'q', 'r', 's'
	opTuple, opEmptyTuple, opSetItems, opBinFloat      = 't', ')', 'u', 'G'
	opBinBytes, opShortBinBytes                        = 'B', 'C'
	opProto, opTuple1, opTuple2, opTuple3              = 0x80, 0x85, 0x86, 0x87
	opNewTrue, opNewFalse, opLong1, opLong4            = 0x88, 0x89, 0x8a, 0x8b
	opShortBinUnicode, opBinUnicode8, opBinBytes8      = 0x8c, 0x8d, 0x8e
	opEmptySet, opAddItems, opFrozenSet, opMemoize     = 0x8f, 0x90, 0x91, 0x94
	opFrame, opByteArray8                              = 0x95, 0x96
)

// refused names the opcodes that construct or look up Python objects.
var refused = map[byte]string{
	'c': "GLOBAL", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD", 'i': "INST", 'o': "OBJ",
	0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 'P': "PERSID", 'Q': "BINPERSID", 0x82: "EXT1", 0x83: "EXT2",
	0x84: "EXT4", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
}

func (s *scanner) run() error {
	if len(s.data) == 0 {
		return fmt.Errorf("pickle: the file is empty")
	}
	for s.pos < len(s.data) {
		op := s.data[s.pos]
		s.pos++
		if name, ok := refused[op]; ok {
			return fmt.Errorf("not a memory snapshot: the pickle builds Python objects (%s at byte %d); "+
				"a snapshot holds only dicts, lists, strings and numbers (torch.cuda.memory._dump_snapshot writes one)", name, s.pos-1)
		}
		if err := s.step(op); err != nil {
			return err
		}
		if op == opStop {
			if len(s.stack) != 1 {
				return s.fail(op, "ends with %d values on the stack, not 1", len(s.stack))
			}
			return nil
		}
	}
	return fmt.Errorf("pickle: no STOP opcode: the file is truncated")
}

func (s *scanner) step(op byte) error {
	var err error
	switch op {
	case opProto:
		var v uint64
		if v, err = s.length(op, 1); err == nil && v > 5 {
			return s.fail(op, "protocol %d is newer than 5", v)
		}
		s.proto = int(v)
		return err
	case opFrame:
		// A frame is a length prefix; its opcodes follow and are scanned.
		var n uint64
		if n, err = s.length(op, 8); err == nil && n > uint64(len(s.data)-s.pos) {
			return s.fail(op, "a frame of %d bytes, %d are left (truncated)", n, len(s.data)-s.pos)
		}
		return err
	case opStop:
		return nil
	case opMark:
		if len(s.marks) >= maxMarks {
			return s.fail(op, "more than %d nested MARKs", maxMarks)
		}
		s.marks = append(s.marks, len(s.stack))
		return nil
	case opPop:
		return s.pop(op, 1)
	case opPopMark:
		_, err = s.popMark(op)
		return err
	case opDup:
		if len(s.stack) == 0 {
			return s.fail(op, "DUP of an empty stack")
		}
		return s.push(op, s.stack[len(s.stack)-1])

	// Scalars: read the argument, push one value.
	case opNone, opNewTrue, opNewFalse:
	case opInt, opLong, opFloat, opString, opUnicode:
		_, err = s.line(op)
	case opBinInt:
		_, err = s.take(op, 4)
	case opBinInt1:
		_, err = s.take(op, 1)
	case opBinInt2:
		_, err = s.take(op, 2)
	case opBinFloat:
		_, err = s.take(op, 8)
	case opLong1, opShortBinString, opShortBinBytes, opShortBinUnicode:
		err = s.counted(op, 1)
	case opLong4, opBinString, opBinBytes, opBinUnicode:
		err = s.counted(op, 4)
	case opBinUnicode8, opBinBytes8, opByteArray8:
		err = s.counted(op, 8)

	// Containers.
	case opEmptyDict:
		return s.push(op, s.newDict())
	case opEmptyList, opEmptyTuple, opEmptySet:
		return s.push(op, -1)
	case opDict:
		var n int
		if n, err = s.popMark(op); err != nil {
			return err
		}
		if n%2 != 0 {
			return s.fail(op, "an odd number (%d) of keys and values", n)
		}
		id := s.newDict()
		s.dicts[id-1] = n / 2
		if n/2 > maxDictEntries {
			return s.fail(op, "a dict with more than %d entries is not a memory snapshot", maxDictEntries)
		}
		return s.push(op, id)
	case opList, opTuple, opFrozenSet:
		if _, err = s.popMark(op); err != nil {
			return err
		}
		return s.push(op, -1)
	case opTuple1, opTuple2, opTuple3:
		if err = s.pop(op, int(op-opTuple1)+1); err != nil {
			return err
		}
		return s.push(op, -1)
	case opAppend:
		if err = s.pop(op, 1); err == nil && len(s.stack) == 0 {
			return s.fail(op, "no list to append to")
		}
		return err
	case opAppends, opAddItems:
		if _, err = s.popMark(op); err == nil && len(s.stack) == 0 {
			return s.fail(op, "no container to add to")
		}
		return err
	case opSetItem:
		if err = s.pop(op, 2); err != nil {
			return err
		}
		return s.addEntries(op, 1)
	case opSetItems:
		var n int
		if n, err = s.popMark(op); err != nil {
			return err
		}
		if n%2 != 0 {
			return s.fail(op, "an odd number (%d) of keys and values", n)
		}
		return s.addEntries(op, n/2)

	// The memo.
	case opPut, opBinPut, opLongBinPut, opMemoize:
		var k uint64
		switch op {
		case opPut:
			var b []byte
			if b, err = s.line(op); err == nil {
				k, err = decimal(b)
			}
		case opBinPut:
			k, err = s.length(op, 1)
		case opLongBinPut:
			k, err = s.length(op, 4)
		default:
			k = uint64(len(s.memo))
		}
		if err != nil {
			return err
		}
		if len(s.stack) == 0 {
			return s.fail(op, "memoizes an empty stack")
		}
		s.memo[k] = s.stack[len(s.stack)-1]
		return nil
	case opGet, opBinGet, opLongBinGet:
		var k uint64
		switch op {
		case opGet:
			var b []byte
			if b, err = s.line(op); err == nil {
				k, err = decimal(b)
			}
		case opBinGet:
			k, err = s.length(op, 1)
		default:
			k, err = s.length(op, 4)
		}
		if err != nil {
			return err
		}
		v, ok := s.memo[k]
		if !ok {
			return s.fail(op, "memo entry %d was never stored", k)
		}
		return s.push(op, v)
	default:
		return s.fail(op, "not a pickle opcode (this is not a pickle, or it is corrupt)")
	}
	if err != nil {
		return err
	}
	return s.push(op, 0)
}

// counted skips a length-prefixed argument of a w-byte length.
func (s *scanner) counted(op byte, w int) error {
	n, err := s.length(op, w)
	if err != nil {
		return err
	}
	_, err = s.take(op, n)
	return err
}

// decimal reads a text-protocol memo index.
func decimal(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("pickle: memo index %q is not a number", b)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("pickle: memo index %q is not a number", b)
		}
		v = v*10 + uint64(c-'0')
	}
	return v, nil
}
