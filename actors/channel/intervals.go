package channel

import "sort"

// interval is a FINished byte range [start,end) of count messages beyond the
// confirmed offset.
type interval struct {
	start, end, count int64
}

// intervals keeps FINished ranges sorted and merged. FINs arrive mostly in
// delivery order, so most inserts extend the last range.
type intervals struct {
	items []interval
}

func (s *intervals) len() int           { return len(s.items) }
func (s *intervals) first() interval    { return s.items[0] }
func (s *intervals) popFirst() interval { iv := s.items[0]; s.items = s.items[1:]; return iv }

// dropPast forgets intervals that reach past end.
func (s *intervals) dropPast(end int64) {
	for len(s.items) > 0 && s.items[len(s.items)-1].end > end {
		s.items = s.items[:len(s.items)-1]
	}
}

func (s *intervals) add(iv interval) {
	i := sort.Search(len(s.items), func(i int) bool { return s.items[i].start >= iv.start })
	if i > 0 && s.items[i-1].end >= iv.start {
		prev := &s.items[i-1]
		if iv.end <= prev.end {
			return // already FINished
		}
		prev.end = iv.end
		prev.count += iv.count
		s.mergeNext(i - 1)
		return
	}
	s.items = append(s.items, interval{})
	copy(s.items[i+1:], s.items[i:])
	s.items[i] = iv
	s.mergeNext(i)
}

func (s *intervals) mergeNext(i int) {
	for i+1 < len(s.items) && s.items[i+1].start <= s.items[i].end {
		next := s.items[i+1]
		if next.end > s.items[i].end {
			s.items[i].end = next.end
		}
		s.items[i].count += next.count
		s.items = append(s.items[:i+1], s.items[i+2:]...)
	}
}

func (s *intervals) covers(off int64) bool {
	i := sort.Search(len(s.items), func(i int) bool { return s.items[i].end > off })
	return i < len(s.items) && s.items[i].start <= off
}
