package strictjson

import (
	"strconv"
	"strings"
	"testing"
)

type inner struct {
	Mode string  `json:"mode"`
	Util float64 `json:"util,omitempty" zero:"is refused: the engine takes a share above 0"`
}

type doc struct {
	Name  string  `json:"name"`
	Inner inner   `json:"inner"`
	List  []inner `json:"list"`
}

// TestDecode: keys spelled exactly, the words of a field of the wrong
// kind, a key from elsewhere, an explicit 0 where zero means unset,
// nothing after the value — each error naming the field by its path.
func TestDecode(t *testing.T) {
	h := Hints{Name: "the format", Values: map[string][]string{"mode": {"fast", "slow"}}, Aliases: map[string]string{"speed": "mode (fast or slow)"},
		Suggest: func(k string, known []string) string { return "; did you mean " + strconv.Quote(known[0]) + "?" }}
	for _, c := range []struct{ json, want string }{
		{`{"name": "a", "inner": {"mode": "fast"}}`, ""},
		{`{"Name": "a"}`, `x.Name: keys are case-sensitive; did you mean "name"?`},
		{`{"inner": {"mode": true}}`, "x.inner.mode: want one of the strings fast, slow, got true or false"},
		{`{"inner": {"speed": "fast"}}`, "x.inner.speed: unknown field; the format says it as mode (fast or slow)"},
		{`{"inner": {"util": 0}}`, "x.inner.util: 0 is refused: the engine takes a share above 0; leave the field out for the default"},
		{`{"list": [{"mode": "fast"}, {"colour": 1}]}`, "x.list[1].colour: unknown field"},
		{`{"name": "a"} {}`, "unexpected data after the JSON value"},
		{`{"name": 3}`, "x.name: want a string, got a number"},
	} {
		var d doc
		err := Decode([]byte(c.json), &d, "x.", h)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.json, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.json, err, c.want)
		}
	}
}
