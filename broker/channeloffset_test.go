package broker

import (
	"testing"

	"github.com/partitamq/partita/storage"
)

func TestParseStartPosition(t *testing.T) {
	for in, want := range map[string]StartPosition{
		"special:-1":        {End: true},
		"timestamp:17":      {Mode: storage.ByTime, Pos: 17e9},
		"msgcount:0":        {Mode: storage.ByCount, Pos: 0},
		" virtual_queue:40": {Mode: storage.ByOffset, Pos: 40},
	} {
		if got, err := ParseStartPosition(in); err != nil || got != want {
			t.Errorf("ParseStartPosition(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "msgcount", "msgcount:-2", "special:0", "timestamp:x", "offset:3", "timestamp:99999999999999"} {
		if _, err := ParseStartPosition(in); err == nil {
			t.Errorf("ParseStartPosition(%q) accepted", in)
		}
	}
}
