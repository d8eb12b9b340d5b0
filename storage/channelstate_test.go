package storage

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// marshal is s in the first layout, which the node reads and no longer
// writes.
func (s ChannelState) marshal() []byte { return s.marshalVersion(stateVersion, 0) }

func manyIntervals(n int) []Interval {
	ivs := make([]Interval, n)
	for i := range ivs {
		ivs[i] = Interval{Start: int64(1000 + 100*i), End: int64(1000 + 100*i + 50), Count: 2}
	}
	return ivs
}

func TestChannelStateRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		channel string
		state   ChannelState
	}{
		{"zero", "c", ChannelState{}},
		{"paused", "ch-1_x.y", ChannelState{Confirmed: 600, ConfirmedCount: 12, Paused: true}},
		{"ephemeral name", "c#ephemeral", ChannelState{Confirmed: 5, Intervals: []Interval{{5 + 1, 9, 1}}}},
		{"5000 intervals", "busy", ChannelState{Confirmed: 900, ConfirmedCount: 30, Intervals: manyIntervals(5000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := SaveChannelState(dir, tt.channel, ChannelState{Confirmed: 1, Intervals: manyIntervals(3)}); err != nil {
				t.Fatal(err)
			}
			// Saving again replaces the old state.
			if err := SaveChannelState(dir, tt.channel, tt.state); err != nil {
				t.Fatal(err)
			}
			got, found, err := LoadChannelState(dir, tt.channel)
			if err != nil || !found {
				t.Fatalf("load: found %v, %v", found, err)
			}
			if !reflect.DeepEqual(got, tt.state) {
				t.Fatalf("loaded %+v, want %+v", got, tt.state)
			}
			if names, err := ListChannelStates(dir); err != nil || !slices.Equal(names, []string{tt.channel}) {
				t.Fatalf("list = %v, %v; want [%s]", names, err, tt.channel)
			}
		})
	}
}

func TestChannelStateCorruptionDetected(t *testing.T) {
	dir := t.TempDir()
	state := ChannelState{Confirmed: 300, ConfirmedCount: 7, Intervals: manyIntervals(4), Paused: true}
	if err := SaveChannelState(dir, "c", state); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, channelsDir, "c"+stateSuffix)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var damaged [][]byte
	for i := range good {
		b := slices.Clone(good)
		b[i] ^= 0x40
		damaged = append(damaged, b)
	}
	// Empty is not damaged but none (TestChannelStateEmptyFileIsNone).
	for _, n := range []int{1, 10, len(good) - 1} {
		damaged = append(damaged, good[:n])
	}
	damaged = append(damaged, make([]byte, len(good)))
	for i, b := range damaged {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, found, err := LoadChannelState(dir, "c"); !errors.Is(err, ErrCorruptState) || !found {
			t.Fatalf("damaged file %d: found %v, err %v; want ErrCorruptState", i, found, err)
		}
	}
}

func TestChannelStateFiles(t *testing.T) {
	dir := t.TempDir()
	if names, err := ListChannelStates(dir); err != nil || len(names) != 0 {
		t.Fatalf("list of fresh dir = %v, %v", names, err)
	}
	if _, found, err := LoadChannelState(dir, "none"); found || err != nil {
		t.Fatalf("load of missing state: found %v, %v", found, err)
	}
	for _, c := range []string{"b", "a", "c"} {
		if err := SaveChannelState(dir, c, ChannelState{Confirmed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	appendToFile(t, filepath.Join(dir, channelsDir, "x.state.tmp123"), []byte("leftover"))
	if err := RemoveChannelState(dir, "b"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveChannelState(dir, "b"); err != nil {
		t.Fatalf("removing a missing state: %v", err)
	}
	if names, err := ListChannelStates(dir); err != nil || !slices.Equal(names, []string{"a", "c"}) {
		t.Fatalf("list = %v, %v; want [a c]", names, err)
	}
}

func TestChannelStateBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b", "../x", "a\\b", "a\x00b", string(make([]byte, 300))} {
		if err := SaveChannelState(dir, name, ChannelState{}); err == nil {
			t.Errorf("saved channel %q", name)
		}
		if _, _, err := LoadChannelState(dir, name); err == nil {
			t.Errorf("loaded channel %q", name)
		}
		if err := RemoveChannelState(dir, name); err == nil {
			t.Errorf("removed channel %q", name)
		}
	}
	for _, s := range []ChannelState{
		{Confirmed: -1},
		{ConfirmedCount: -1},
		{Confirmed: 10, Intervals: []Interval{{5, 20, 1}}},
		{Intervals: []Interval{{5, 5, 1}}},
		{Intervals: []Interval{{20, 30, 1}, {10, 15, 1}}},
		{Intervals: []Interval{{10, 30, 1}, {20, 40, 1}}},
	} {
		if err := SaveChannelState(dir, "c", s); err == nil {
			t.Errorf("saved invalid state %+v", s)
		}
	}
}

// A state overwrites in place the file that does not hold the newest one,
// so a torn overwrite leaves the newest durable state to load, and the
// next save goes where the torn one was. A record may be followed by the
// tail of an older, longer one.
func TestChannelStateTornOverwriteKeepsTheOlderState(t *testing.T) {
	dir := t.TempDir()
	long := ChannelState{Confirmed: 100, ConfirmedCount: 4, Intervals: manyIntervals(20)}
	short := ChannelState{Confirmed: 5000, ConfirmedCount: 90}
	for _, s := range []ChannelState{long, long, short} {
		if err := SaveChannelState(dir, "c", s); err != nil {
			t.Fatal(err)
		}
	}
	first := filepath.Join(dir, channelsDir, "c"+stateSuffix)
	second := filepath.Join(dir, channelsDir, "c"+stateSlotSuffix)
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) <= len(short.marshalSlot(3)) {
		t.Fatalf("the third save left %d bytes in the first file: it did not overwrite the longer record in place", len(b))
	}
	if got, found, err := LoadChannelState(dir, "c"); err != nil || !found || !reflect.DeepEqual(got, short) {
		t.Fatalf("loaded %+v %v %v, want %+v", got, found, err, short)
	}
	// The fourth save goes to the second file; tear it.
	newer := ChannelState{Confirmed: 6000, ConfirmedCount: 95}
	if err := SaveChannelState(dir, "c", newer); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	torn := slices.Clone(rec)
	torn[len(newer.marshalSlot(4))-1] ^= 0xff
	if err := os.WriteFile(second, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, found, err := LoadChannelState(dir, "c"); err != nil || !found || !reflect.DeepEqual(got, short) {
		t.Fatalf("after a torn overwrite: %+v %v %v, want the older %+v", got, found, err, short)
	}
	// Saved again, the state goes over the torn file, not the good one.
	if err := SaveChannelState(dir, "c", newer); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(first); !slices.Equal(b, b2) {
		t.Fatal("the save after a torn overwrite wrote over the newest good state")
	}
	if got, _, err := LoadChannelState(dir, "c"); err != nil || !reflect.DeepEqual(got, newer) {
		t.Fatalf("loaded %+v %v, want %+v", got, err, newer)
	}
}

// A state file of the first layout, written whole and renamed, still loads
// (exactly its length), and the next save goes beside it.
func TestChannelStateFirstLayoutStillLoads(t *testing.T) {
	dir := t.TempDir()
	old := ChannelState{Confirmed: 70, ConfirmedCount: 3, Intervals: manyIntervals(2)}
	path := filepath.Join(dir, channelsDir, "c"+stateSuffix)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, old.marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, found, err := LoadChannelState(dir, "c"); err != nil || !found || !reflect.DeepEqual(got, old) {
		t.Fatalf("loaded %+v %v %v, want %+v", got, found, err, old)
	}
	if err := os.WriteFile(path, append(old.marshal(), 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadChannelState(dir, "c"); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a first-layout file with a byte too many: %v, want ErrCorruptState", err)
	}
	if err := os.WriteFile(path, old.marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	next := ChannelState{Confirmed: 80, ConfirmedCount: 4}
	if err := SaveChannelState(dir, "c", next); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !slices.Equal(b, old.marshal()) {
		t.Fatal("the save after a first-layout file overwrote it")
	}
	if got, _, err := LoadChannelState(dir, "c"); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("loaded %+v %v, want %+v", got, err, next)
	}
	if names, _ := ListChannelStates(dir); !slices.Equal(names, []string{"c"}) {
		t.Fatalf("list = %v, want [c]", names)
	}
	if err := RemoveChannelState(dir, "c"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := LoadChannelState(dir, "c"); found || err != nil {
		t.Fatalf("after removal: found %v, %v", found, err)
	}
}
