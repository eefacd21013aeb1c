package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// decodePickle runs the pickle machine (pickletools.py documents every
// opcode and its argument) over data for the opcodes of plain data only:
// dicts, lists, tuples, sets, strings, bytes, integers, floats, None and
// booleans — all a memory snapshot is made of. Anything else is an error:
// the opcodes that name or call a Python global (GLOBAL, REDUCE, BUILD, …)
// mean the file is something else (a torch.save checkpoint, a hostile
// pickle), so nothing in a file is ever looked up or executed.
//
// Work and memory are linear in the file and capped whatever it holds:
// every value costs at least one opcode byte and at most maxValues are
// made; memoized values are references, never copies (the memo shares one
// container however often the file gets it); integers wider than the 64
// bits a snapshot uses are refused before they are converted.
func decodePickle(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("pickle: the file is empty")
	}
	m := machine{data: data, memo: map[uint64]any{}}
	return m.run()
}

// Limits of the decoder, far above what PyTorch writes (a dict has a few
// dozen keys, nesting is six deep, a run's trace of 100,000 entries is a
// few million values) and low enough that a hostile file stays cheap.
const (
	maxValues      = 1 << 24 // values made, memo references included
	maxDictEntries = 1 << 12
	maxStack       = 1 << 16
	maxMarks       = 1 << 10
	maxIntBytes    = 9  // a 64-bit unsigned integer in two's complement
	maxIntDigits   = 21 // a 64-bit integer in decimal, with its sign
)

// Decoded containers. A list, tuple or set is a *plist; a dict a *pdict.
// Both are pointers, so a memoized container is shared, not copied.
type (
	plist struct {
		chunks [][]any // the items, in chunks that are never copied to grow
		n      int
		kind   string // "list", "tuple" or "set"
	}
	pdict struct {
		entries []pentry // in order; a later entry for a key wins
		size    int
	}
	pentry struct {
		key string
		val any
	}
	pbytes string // a bytes object (snapshots have none)
)

type machine struct {
	data   []byte
	pos    int
	stack  []any
	marks  []int
	memo   map[uint64]any
	values int
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

func (m *machine) run() (any, error) {
	for m.pos < len(m.data) {
		op := m.data[m.pos]
		m.pos++
		if name, ok := refused[op]; ok {
			return nil, fmt.Errorf("not a memory snapshot: the pickle builds Python objects (%s at byte %d); "+
				"a snapshot holds only dicts, lists, strings and numbers (torch.cuda.memory._dump_snapshot writes one)", name, m.pos-1)
		}
		if op == opStop {
			if len(m.stack) != 1 || len(m.marks) != 0 {
				return nil, m.fail(op, "ends with %d values on the stack and %d open MARKs, not one value", len(m.stack), len(m.marks))
			}
			return m.stack[0], nil
		}
		if err := m.step(op); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("pickle: no STOP opcode: the file is truncated")
}

func (m *machine) fail(op byte, format string, args ...any) error {
	return fmt.Errorf("pickle: opcode %q at byte %d: %s", op, m.pos, fmt.Sprintf(format, args...))
}

// step runs one opcode.
func (m *machine) step(op byte) error {
	switch op {
	case opProto, opFrame:
		return m.header(op)
	case opMark:
		if len(m.marks) >= maxMarks {
			return m.fail(op, "more than %d nested MARKs", maxMarks)
		}
		m.marks = append(m.marks, len(m.stack))
		return nil
	case opPop:
		_, err := m.pop(op)
		return err
	case opPopMark:
		_, err := m.popMark(op)
		return err
	case opDup:
		if len(m.stack) == 0 {
			return m.fail(op, "DUP of an empty stack")
		}
		return m.push(op, m.stack[len(m.stack)-1])
	case opPut, opBinPut, opLongBinPut, opMemoize:
		return m.put(op)
	case opGet, opBinGet, opLongBinGet:
		return m.get(op)
	}
	if v, ok, err := m.scalar(op); ok || err != nil {
		if err != nil {
			return err
		}
		return m.push(op, v)
	}
	return m.container(op)
}

// header handles PROTO and FRAME (a length prefix whose opcodes follow).
func (m *machine) header(op byte) error {
	if op == opProto {
		v, err := m.uint(op, 1)
		if err == nil && v > 5 {
			return m.fail(op, "protocol %d is newer than 5", v)
		}
		return err
	}
	n, err := m.uint(op, 8)
	if err == nil && n > uint64(len(m.data)-m.pos) {
		return m.fail(op, "a frame of %d bytes, %d are left (truncated)", n, len(m.data)-m.pos)
	}
	return err
}

// scalar decodes the opcodes that push one plain value; ok is false for
// any other opcode.
func (m *machine) scalar(op byte) (v any, ok bool, err error) {
	switch op {
	case opNone:
		return nil, true, nil
	case opNewTrue, opNewFalse:
		return op == opNewTrue, true, nil
	case opBinInt:
		b, err := m.take(op, 4)
		if err != nil {
			return nil, true, err
		}
		return int64(int32(binary.LittleEndian.Uint32(b))), true, nil
	case opBinInt1:
		n, err := m.uint(op, 1)
		return int64(n), true, err
	case opBinInt2:
		n, err := m.uint(op, 2)
		return int64(n), true, err
	case opLong1, opLong4:
		w := 1
		if op == opLong4 {
			w = 4
		}
		n, err := m.uint(op, w)
		if err != nil {
			return nil, true, err
		}
		b, err := m.take(op, n)
		if err != nil {
			return nil, true, err
		}
		v, err := m.long(op, b)
		return v, true, err
	case opInt, opLong:
		v, err := m.textInt(op)
		return v, true, err
	case opBinFloat:
		b, err := m.take(op, 8)
		if err != nil {
			return nil, true, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), true, nil
	case opFloat:
		b, err := m.line(op)
		if err != nil {
			return nil, true, err
		}
		f, perr := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
		if perr != nil {
			return nil, true, m.fail(op, "%q is not a float", b)
		}
		return f, true, nil
	}
	return m.text(op)
}

// text decodes the string and bytes opcodes.
func (m *machine) text(op byte) (any, bool, error) {
	var w int
	switch op {
	case opShortBinString, opShortBinBytes, opShortBinUnicode:
		w = 1
	case opBinString, opBinBytes, opBinUnicode:
		w = 4
	case opBinUnicode8, opBinBytes8, opByteArray8:
		w = 8
	case opString, opUnicode:
		b, err := m.line(op)
		if err != nil {
			return nil, true, err
		}
		return m.quoted(op, b)
	default:
		return nil, false, nil
	}
	n, err := m.uint(op, w)
	if err != nil {
		return nil, true, err
	}
	b, err := m.take(op, n)
	if err != nil {
		return nil, true, err
	}
	switch op {
	case opShortBinUnicode, opBinUnicode, opBinUnicode8:
		return string(b), true, nil
	case opShortBinBytes, opBinBytes, opBinBytes8, opByteArray8:
		return pbytes(b), true, nil
	}
	return string(b), true, nil // protocol-2 str: bytes that Python 3 reads as text
}

// quoted decodes protocol 0's STRING argument (a Python repr: quoted,
// with escape_decode's escapes) and UNICODE argument (raw-unicode-escape:
// latin-1 bytes, \uXXXX and \UXXXXXXXX after an odd run of backslashes).
func (m *machine) quoted(op byte, b []byte) (any, bool, error) {
	var s string
	var ok bool
	if op == opString {
		if len(b) >= 2 && (b[0] == '\'' || b[0] == '"') && b[len(b)-1] == b[0] {
			s, ok = escapeDecode(b[1 : len(b)-1])
		}
	} else {
		s, ok = rawUnicodeEscape(b)
	}
	if !ok {
		return nil, true, m.fail(op, "its text argument is not a quoted, escaped string")
	}
	return s, true, nil
}

// escapeDecode undoes Python's bytes escapes (codecs.escape_decode):
// \\ \' \" \a \b \f \n \r \t \v, \xHH, up to three octal digits, and
// a backslash before a newline; other backslashes stay.
func escapeDecode(b []byte) (string, bool) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		i++
		switch c := b[i]; c {
		case '\\', '\'', '"':
			out = append(out, c)
		case 'a', 'b', 'f', 'n', 'r', 't', 'v':
			out = append(out, map[byte]byte{'a': 7, 'b': 8, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11}[c])
		case '\n':
		case 'x':
			if i+2 >= len(b) {
				return "", false
			}
			v, err := strconv.ParseUint(string(b[i+1:i+3]), 16, 8)
			if err != nil {
				return "", false
			}
			out, i = append(out, byte(v)), i+2
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := 0, 0
			for ; n < 3 && i+n < len(b) && b[i+n] >= '0' && b[i+n] <= '7'; n++ {
				v = v*8 + int(b[i+n]-'0')
			}
			out, i = append(out, byte(v)), i+n-1
		default:
			out = append(out, '\\', c)
		}
	}
	return string(out), true
}

// rawUnicodeEscape decodes Python's raw-unicode-escape codec.
func rawUnicodeEscape(b []byte) (string, bool) {
	out := make([]rune, 0, len(b))
	run := 0 // backslashes just before b[i]
	for i := 0; i < len(b); i++ {
		c := b[i]
		if (c == 'u' || c == 'U') && run%2 == 1 {
			n := 4
			if c == 'U' {
				n = 8
			}
			if i+n >= len(b) {
				return "", false
			}
			v, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32)
			if err != nil || v > utf8.MaxRune {
				return "", false
			}
			out[len(out)-1] = rune(v) // replaces the escaping backslash
			i, run = i+n, 0
			continue
		}
		if c == '\\' {
			run++
		} else {
			run = 0
		}
		out = append(out, rune(c)) // latin-1
	}
	return string(out), true
}

// long decodes a little-endian two's-complement integer of at most
// maxIntBytes bytes: int64, or uint64 for addresses at or above 2^63.
func (m *machine) long(op byte, b []byte) (any, error) {
	if len(b) > maxIntBytes {
		return nil, m.fail(op, "an integer of %d bytes: a memory snapshot's integers fit in 64 bits", len(b))
	}
	if len(b) == 0 {
		return int64(0), nil
	}
	neg := b[len(b)-1]&0x80 != 0
	if len(b) == maxIntBytes {
		if neg || b[8] != 0 {
			return nil, m.fail(op, "an integer outside the 64 bits a memory snapshot uses")
		}
		return binary.LittleEndian.Uint64(b[:8]), nil
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if neg { // sign-extend
		u |= math.MaxUint64 << (8 * uint(len(b)))
	}
	if !neg && u > math.MaxInt64 {
		return u, nil
	}
	return int64(u), nil
}

// textInt decodes protocol 0's INT and LONG arguments ("01"/"00" are True
// and False in INT; LONG ends with an L).
func (m *machine) textInt(op byte) (any, error) {
	b, err := m.line(op)
	if err != nil {
		return nil, err
	}
	if op == opLong {
		b = bytes.TrimSuffix(b, []byte("L"))
	}
	if len(b) > maxIntDigits {
		return nil, m.fail(op, "an integer of %d digits: a memory snapshot's integers fit in 64 bits", len(b))
	}
	s := string(b)
	if op == opInt && (s == "00" || s == "01") {
		return s == "01", nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, nil
	}
	return nil, m.fail(op, "%q is not a 64-bit integer", b)
}

// container runs the opcodes that build or fill lists, tuples, sets and
// dicts.
func (m *machine) container(op byte) error {
	switch op {
	case opEmptyDict:
		return m.push(op, &pdict{})
	case opEmptyList, opEmptyTuple, opEmptySet:
		return m.push(op, &plist{kind: map[byte]string{opEmptyList: "list", opEmptyTuple: "tuple", opEmptySet: "set"}[op]})
	case opDict:
		items, err := m.popMark(op)
		if err != nil {
			return err
		}
		d := &pdict{}
		if err := m.setItems(op, d, items); err != nil {
			return err
		}
		return m.push(op, d)
	case opList, opTuple, opFrozenSet:
		items, err := m.popMark(op)
		if err != nil {
			return err
		}
		kind := map[byte]string{opList: "list", opTuple: "tuple", opFrozenSet: "set"}[op]
		return m.push(op, newList(kind, items))
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(m.stack) < n {
			return m.fail(op, "pops %d values from a stack of %d", n, len(m.stack))
		}
		l := newList("tuple", m.stack[len(m.stack)-n:])
		m.stack = m.stack[:len(m.stack)-n]
		return m.push(op, l)
	case opAppend, opAppends, opAddItems:
		return m.appendItems(op)
	case opSetItem, opSetItems:
		var items []any
		var err error
		if op == opSetItem {
			if len(m.stack) < 2 {
				return m.fail(op, "pops 2 values from a stack of %d", len(m.stack))
			}
			items = m.stack[len(m.stack)-2:]
			m.stack = m.stack[:len(m.stack)-2]
		} else if items, err = m.popMark(op); err != nil {
			return err
		}
		if len(m.stack) == 0 {
			return m.fail(op, "no dict to set items in")
		}
		d, ok := m.stack[len(m.stack)-1].(*pdict)
		if !ok {
			return m.fail(op, "sets items in %s, not a dict", kind(m.stack[len(m.stack)-1]))
		}
		return m.setItems(op, d, items)
	}
	return m.fail(op, "not a pickle opcode (this is not a pickle, or it is corrupt)")
}

// appendItems runs APPEND, APPENDS and ADDITEMS.
func (m *machine) appendItems(op byte) error {
	var items []any
	if op == opAppend {
		v, err := m.pop(op)
		if err != nil {
			return err
		}
		items = []any{v}
	} else {
		var err error
		if items, err = m.popMark(op); err != nil {
			return err
		}
	}
	if len(m.stack) == 0 {
		return m.fail(op, "no list to append to")
	}
	l, ok := m.stack[len(m.stack)-1].(*plist)
	if !ok || l.kind == "tuple" {
		return m.fail(op, "appends to %s, not a list", kind(m.stack[len(m.stack)-1]))
	}
	l.add(items)
	return nil
}

// listChunk is the largest chunk a list's items are kept in: a list grows
// by new chunks, so a long one is never copied to grow (copying a slice of
// interfaces while the collector runs costs far more than the slice).
const listChunk = 1 << 12

// add appends items to l.
func (l *plist) add(items []any) {
	for len(items) > 0 {
		if len(l.chunks) == 0 || len(l.chunks[len(l.chunks)-1]) == cap(l.chunks[len(l.chunks)-1]) {
			l.chunks = append(l.chunks, make([]any, 0, min(max(len(items), 4), listChunk)))
		}
		last := &l.chunks[len(l.chunks)-1]
		k := min(len(items), cap(*last)-len(*last))
		*last = append(*last, items[:k]...)
		l.n += k
		items = items[k:]
	}
}

// items returns the list's items in one slice.
func (l *plist) items() []any {
	if len(l.chunks) == 1 {
		return l.chunks[0]
	}
	out := make([]any, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

// newList is a list, tuple or set of a copy of items.
func newList(kind string, items []any) *plist {
	l := &plist{kind: kind}
	l.add(items)
	return l
}

// setItems adds key/value pairs to d.
func (m *machine) setItems(op byte, d *pdict, items []any) error {
	if len(items)%2 != 0 {
		return m.fail(op, "an odd number (%d) of keys and values", len(items))
	}
	if d.size += len(items) / 2; d.size > maxDictEntries {
		return m.fail(op, "a dict with more than %d entries is not a memory snapshot", maxDictEntries)
	}
	for i := 0; i < len(items); i += 2 {
		if k, ok := items[i].(string); ok {
			d.entries = append(d.entries, pentry{k, items[i+1]})
		}
	}
	return nil
}

func (m *machine) put(op byte) error {
	var k uint64
	var err error
	switch op {
	case opPut:
		var b []byte
		if b, err = m.line(op); err == nil {
			k, err = decimal(b)
		}
	case opBinPut:
		k, err = m.uint(op, 1)
	case opLongBinPut:
		k, err = m.uint(op, 4)
	default:
		k = uint64(len(m.memo))
	}
	if err != nil {
		return err
	}
	if len(m.stack) == 0 {
		return m.fail(op, "memoizes an empty stack")
	}
	if m.values++; m.values > maxValues {
		return m.fail(op, "more than %d values: more than a memory snapshot holds (record fewer entries with max_entries)", maxValues)
	}
	m.memo[k] = m.stack[len(m.stack)-1]
	return nil
}

func (m *machine) get(op byte) error {
	var k uint64
	var err error
	switch op {
	case opGet:
		var b []byte
		if b, err = m.line(op); err == nil {
			k, err = decimal(b)
		}
	case opBinGet:
		k, err = m.uint(op, 1)
	default:
		k, err = m.uint(op, 4)
	}
	if err != nil {
		return err
	}
	v, ok := m.memo[k]
	if !ok {
		return m.fail(op, "memo entry %d was never stored", k)
	}
	return m.push(op, v)
}

func (m *machine) push(op byte, v any) error {
	if len(m.stack) >= maxStack {
		return m.fail(op, "more than %d values on the stack", maxStack)
	}
	if m.values++; m.values > maxValues {
		return m.fail(op, "more than %d values: more than a memory snapshot holds (record fewer entries with max_entries)", maxValues)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *machine) pop(op byte) (any, error) {
	if len(m.stack) == 0 {
		return nil, m.fail(op, "pops a value from an empty stack")
	}
	v := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

// popMark removes everything above the last MARK and the mark, and returns
// it (a view of the stack, valid until the next push).
func (m *machine) popMark(op byte) ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.fail(op, "no MARK to pop to")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	if k > len(m.stack) {
		return nil, m.fail(op, "its MARK is above the stack")
	}
	items := m.stack[k:]
	m.stack = m.stack[:k]
	return items, nil
}

// take returns the next n bytes, or an error when fewer are left.
func (m *machine) take(op byte, n uint64) ([]byte, error) {
	if n > uint64(len(m.data)-m.pos) {
		return nil, m.fail(op, "declares %d bytes, %d are left (truncated or corrupt)", n, len(m.data)-m.pos)
	}
	b := m.data[m.pos : m.pos+int(n)]
	m.pos += int(n)
	return b, nil
}

// line returns the bytes up to the next newline (protocol 0's arguments).
func (m *machine) line(op byte) ([]byte, error) {
	i := bytes.IndexByte(m.data[m.pos:], '\n')
	if i < 0 {
		return nil, m.fail(op, "its text argument has no end of line (truncated)")
	}
	b := m.data[m.pos : m.pos+i]
	m.pos += i + 1
	return b, nil
}

// uint reads a little-endian unsigned integer of w bytes.
func (m *machine) uint(op byte, w int) (uint64, error) {
	b, err := m.take(op, uint64(w))
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
