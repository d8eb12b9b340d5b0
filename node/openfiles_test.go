package node

import "testing"

func TestOpenFilesNeeded(t *testing.T) {
	cases := []struct {
		partitions int
		limit      uint64
		ok         bool
	}{
		{0, 1024, true},
		{0, 1023, false},
		{10000, 1 << 20, true},
		{10000, 1024, false},
		{10000, 31024, true},
		{10000, 31023, false},
	}
	for _, tc := range cases {
		need, ok := openFilesNeeded(tc.partitions, tc.limit)
		if ok != tc.ok {
			t.Errorf("%d partitions, limit %d: ok=%v (needs %d), want %v", tc.partitions, tc.limit, ok, need, tc.ok)
		}
	}
}
