package channel

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

// loadHeaders loads one message per header (IDs 1..n, 40 bytes each).
func loadHeaders(t *testing.T, headers ...string) *Core {
	t.Helper()
	msgs := logOf(len(headers))
	for i, h := range headers {
		msgs[i].Header = []byte(h)
	}
	c := NewCore(Config{}, storage.ChannelState{}, int64(40*len(msgs)), int64(len(msgs)))
	c.Loaded(msgs, t0)
	return c
}

func tagged(tag string) string { return fmt.Sprintf(`{"##client_dispatch_tag":%q}`, tag) }

// A tagged consumer takes only its tag's messages; an untagged one takes
// untagged messages and those of a tag no consumer desires. When the last
// consumer of a tag leaves, its messages go to the untagged ones.
func TestTagDispatch(t *testing.T) {
	c := loadHeaders(t, tagged("a"), "", tagged("c"), tagged("a"), `{"k":"v"}`, tagged("a"))
	c.Select(1, Selector{Tag: "a"})
	c.Select(2, Selector{})
	if got := ids(c.Take(2, 10, t0, time.Minute)); !slices.Equal(got, []uint64{2, 3, 5}) {
		t.Fatalf("untagged consumer took %v, want [2 3 5]", got)
	}
	if got := ids(c.Take(1, 2, t0, time.Minute)); !slices.Equal(got, []uint64{1, 4}) {
		t.Fatalf("tag a consumer took %v, want [1 4]", got)
	}
	if got := c.Take(2, 10, t0, time.Minute); len(got) != 0 {
		t.Fatalf("untagged consumer took %v while tag a has a consumer", ids(got))
	}
	c.Select(1, Selector{})
	if got := ids(c.Take(2, 10, t0, time.Minute)); !slices.Equal(got, []uint64{6}) {
		t.Fatalf("after the tag's consumer left, the untagged one took %v, want [6]", got)
	}
}

// A filter confirms what it rejects without delivering it; the channel's
// confirmed offset then covers it once the delivered messages are FINished.
func TestFilterConfirmsWhatItRejects(t *testing.T) {
	f, err := NewFilter(FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v"})
	if err != nil {
		t.Fatal(err)
	}
	c := loadHeaders(t, `{"k":"v"}`, `{"k":"w"}`, "", `{"k":"v"}`, `{"k":1}`)
	c.Select(1, Selector{Filter: f})
	ds := c.Take(1, 10, t0, time.Minute)
	if got := ids(ds); !slices.Equal(got, []uint64{1, 4}) {
		t.Fatalf("took %v, want [1 4]", got)
	}
	if c.Filtered() != 3 || c.Available() != 0 {
		t.Fatalf("filtered %d, available %d; want 3 and 0", c.Filtered(), c.Available())
	}
	for _, d := range ds {
		if err := c.Fin(1, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.State(); st.Confirmed != 200 || st.ConfirmedCount != 5 {
		t.Fatalf("confirmed %d (%d messages), want 200 (5)", st.Confirmed, st.ConfirmedCount)
	}
}

// An ordered channel hands out its first message only, to a consumer whose
// tag takes it; a first message the filter rejects is confirmed and the
// next is first.
func TestOrderedTagAndFilter(t *testing.T) {
	f, err := NewFilter(FilterSpec{Type: FilterRegex, FilterExtKey: "k", FilterData: "^ok"})
	if err != nil {
		t.Fatal(err)
	}
	c := loadHeaders(t, tagged("a"), `{"k":"no"}`, `{"k":"ok1"}`, `{"k":"ok2"}`)
	c.SetOrdered(true)
	c.Select(1, Selector{Tag: "a"})
	c.Select(2, Selector{Filter: f})
	if got := c.Take(2, 1, t0, time.Minute); len(got) != 0 {
		t.Fatalf("untagged consumer took %v before the first message, of tag a", ids(got))
	}
	d := c.Take(1, 1, t0, time.Minute)
	if got := ids(d); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("tag a consumer took %v, want [1]", got)
	}
	if got := c.Take(2, 1, t0, time.Minute); len(got) != 0 {
		t.Fatalf("took %v with the first message in flight", ids(got))
	}
	if err := c.Fin(1, 1); err != nil {
		t.Fatal(err)
	}
	if got := ids(c.Take(2, 1, t0, time.Minute)); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("filtered consumer took %v, want [3] after 2 was filtered", got)
	}
	if c.Filtered() != 1 {
		t.Fatalf("filtered %d, want 1", c.Filtered())
	}
}

// Each of youzan's filter kinds, and inverse.
func TestFilterKinds(t *testing.T) {
	cases := []struct {
		spec   FilterSpec
		header string
		want   bool
	}{
		{FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v"}, `{"k":"v"}`, true},
		{FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v"}, `{"k":"vv"}`, false},
		{FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v"}, ``, false},
		{FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v", Inverse: true}, `{"k":"w"}`, true},
		{FilterSpec{Type: FilterEqual, FilterExtKey: "k", FilterData: "v", Inverse: true}, ``, true},
		{FilterSpec{Type: FilterRegex, FilterExtKey: "k", FilterData: "^a.c$"}, `{"k":"abc"}`, true},
		{FilterSpec{Type: FilterRegex, FilterExtKey: "k", FilterData: "^a.c$"}, `{"k":"abcd"}`, false},
		{FilterSpec{Type: FilterGlob, FilterExtKey: "k", FilterData: "a*.{x,y}"}, `{"k":"a/b.y"}`, true},
		{FilterSpec{Type: FilterGlob, FilterExtKey: "k", FilterData: "a?[!0-9]"}, `{"k":"abc"}`, true},
		{FilterSpec{Type: FilterGlob, FilterExtKey: "k", FilterData: "a?[!0-9]"}, `{"k":"ab1"}`, false},
		{FilterSpec{Type: FilterMulti, FilterExtKey: "all", FilterDataList: []FilterSpecEntry{{"a", "1"}, {"b", "2"}}}, `{"a":"1","b":"2"}`, true},
		{FilterSpec{Type: FilterMulti, FilterExtKey: "all", FilterDataList: []FilterSpecEntry{{"a", "1"}, {"b", "2"}}}, `{"a":"1","b":"3"}`, false},
		{FilterSpec{Type: FilterMulti, FilterExtKey: "any", FilterDataList: []FilterSpecEntry{{"a", "1"}, {"b", "2"}}}, `{"a":"0","b":"2"}`, true},
		{FilterSpec{Type: FilterMulti, FilterExtKey: "any", FilterDataList: []FilterSpecEntry{{"a", "1"}, {"b", "2"}}}, `{"a":"0"}`, false},
	}
	for _, tc := range cases {
		f, err := NewFilter(tc.spec)
		if err != nil {
			t.Fatalf("%+v: %v", tc.spec, err)
		}
		if got := f.Match([]byte(tc.header)); got != tc.want {
			t.Errorf("%+v on %s = %v, want %v", tc.spec, tc.header, got, tc.want)
		}
	}
	for _, bad := range []FilterSpec{
		{Type: FilterEqual, FilterData: "v"},
		{Type: FilterRegex, FilterExtKey: "k", FilterData: "("},
		{Type: FilterGlob, FilterExtKey: "k", FilterData: "{a"},
		{Type: FilterMulti, FilterExtKey: "some", FilterDataList: []FilterSpecEntry{{"a", "1"}}},
		{Type: 9, FilterExtKey: "k", FilterData: "v"},
	} {
		if _, err := NewFilter(bad); err == nil {
			t.Errorf("%+v compiled", bad)
		}
	}
}
