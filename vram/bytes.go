package vram

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Bytes is an amount of memory: an int64 count of bytes, as time.Duration is
// a count of nanoseconds. Build one by multiplying a unit: 80*vram.GiB.
// JSON encodes it as a plain number of bytes.
type Bytes int64

// Binary (IEC) units, used for display: what PyTorch and nvidia-smi print.
const (
	Byte Bytes = 1
	KiB        = 1024 * Byte
	MiB        = 1024 * KiB
	GiB        = 1024 * MiB
	TiB        = 1024 * GiB
	PiB        = 1024 * TiB
)

// Decimal (SI) units, as in vendor specs ("80 GB") and most papers.
const (
	KB Bytes = 1000
	MB       = 1000 * KB
	GB       = 1000 * MB
	TB       = 1000 * GB
	PB       = 1000 * TB
)

// MaxBytes is the largest representable amount (8 EiB).
const MaxBytes = Bytes(math.MaxInt64)

// String prints b in the largest IEC unit that keeps the number ≥ 1, with one
// decimal: "14.0 GiB", "512.0 MiB", "0 B", "-2.0 KiB".
func (b Bytes) String() string {
	if b == 0 {
		return "0 B"
	}
	u, name := b.unit()
	if u == Byte {
		return strconv.FormatInt(int64(b), 10) + " B"
	}
	return strconv.FormatFloat(float64(b)/float64(u), 'f', 1, 64) + " " + name
}

// unit is the IEC unit String uses for b.
func (b Bytes) unit() (Bytes, string) {
	a := b
	if a < 0 {
		a = -a
		if a < 0 { // math.MinInt64
			a = MaxBytes
		}
	}
	switch {
	case a >= PiB:
		return PiB, "PiB"
	case a >= TiB:
		return TiB, "TiB"
	case a >= GiB:
		return GiB, "GiB"
	case a >= MiB:
		return MiB, "MiB"
	case a >= KiB:
		return KiB, "KiB"
	}
	return Byte, "B"
}

// In returns b as a float number of unit u: (3*GiB).In(GiB) == 3.
func (b Bytes) In(u Bytes) float64 { return float64(b) / float64(u) }

// GiB returns b in gibibytes.
func (b Bytes) GiB() float64 { return b.In(GiB) }

// GB returns b in decimal gigabytes.
func (b Bytes) GB() float64 { return b.In(GB) }

// Format formats b in unit u with prec decimals: "14.00 GiB".
func (b Bytes) Format(u Bytes, prec int) string {
	return strconv.FormatFloat(b.In(u), 'f', prec, 64) + " " + UnitName(u)
}

// UnitName is the symbol of one of the unit constants ("GiB", "GB"), or "B".
func UnitName(u Bytes) string {
	for _, x := range units {
		if x.size == u {
			return x.name
		}
	}
	return "B"
}

var units = []struct {
	name string
	size Bytes
}{
	{"B", Byte},
	{"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB}, {"TiB", TiB}, {"PiB", PiB},
	{"KB", KB}, {"MB", MB}, {"GB", GB}, {"TB", TB}, {"PB", PB},
}

// ParseBytes reads an amount such as "80GB", "80 GiB", "1.5 TiB", "512 MiB",
// "4096" or "4096B". Units are case-sensitive in the i (GiB ≠ GB) and accept
// lower case otherwise ("80gb" is 80 GB). A number without unit is bytes.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) })
	num, unit := t, "B"
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	}
	if num == "" {
		for _, w := range []string{"nan", "inf", "+inf", "-inf", "infinity"} {
			if f := strings.Fields(strings.ToLower(t)); len(f) > 0 && f[0] == w {
				return 0, fmt.Errorf("vram: bytes %q: %s is not a finite number", s, strings.Fields(t)[0])
			}
		}
		return 0, fmt.Errorf("vram: bytes %q: missing number", s)
	}
	var size Bytes
	for _, u := range units {
		if strings.EqualFold(u.name, unit) {
			size = u.size
			break
		}
	}
	if size == 0 {
		return 0, fmt.Errorf("vram: bytes %q: unknown unit %q; known: B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB", s, unit)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("vram: bytes %q: must not be negative", s)
		}
		v, ok := mulCount(n, int64(size))
		if !ok {
			return 0, fmt.Errorf("vram: bytes %q: larger than %d bytes", s, int64(MaxBytes))
		}
		return Bytes(v), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("vram: bytes %q: %q is not a number", s, num)
	}
	if f < 0 {
		return 0, fmt.Errorf("vram: bytes %q: must not be negative", s)
	}
	v := math.Round(f * float64(size))
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("vram: bytes %q: larger than %d bytes", s, int64(MaxBytes))
	}
	return Bytes(v), nil
}

// MarshalText lets Bytes appear as a map key or in text formats; it writes
// the plain byte count.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalText accepts a byte count or anything ParseBytes accepts, so plan
// files may say "80 GiB".
func (b *Bytes) UnmarshalText(text []byte) error {
	v, err := ParseBytes(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// UnmarshalJSON accepts a number of bytes or a string such as "80 GiB".
func (b *Bytes) UnmarshalJSON(data []byte) error {
	s := strings.TrimSpace(string(data))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return fmt.Errorf("vram: bytes %s: %v", s, err)
		}
		return b.UnmarshalText([]byte(u))
	}
	// A JSON number is a byte count, negative allowed (a headroom can be).
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("vram: bytes %s: want an integer byte count or a string such as \"80 GiB\"", s)
	}
	*b = Bytes(n)
	return nil
}

// MarshalJSON writes a plain number of bytes.
func (b Bytes) MarshalJSON() ([]byte, error) { return b.MarshalText() }
