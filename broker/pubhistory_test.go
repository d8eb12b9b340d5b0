package broker

import (
	"slices"
	"testing"
	"time"
)

// youzan's hourly_pub_size: what a partition committed between two
// samples counts in the later one's hour; hours without a sample count
// nothing, those over a day old are forgotten, and a log that restarted
// lower counts from there.
func TestPubHistoryCountsCommittedBytesByHour(t *testing.T) {
	at := func(h, m int) time.Time {
		return time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}
	var h PubHistory
	h.Observe(at(10, 0), 1000) // the first sample is the base
	h.Observe(at(10, 30), 1500)
	h.Observe(at(11, 1), 1800)
	h.Observe(at(13, 5), 2000)
	h.Observe(at(13, 6), 50) // a full sync restarted the log lower
	h.Observe(at(13, 7), 80)
	if got := h.Before(at(14, 0), 4); !slices.Equal(got, []int64{500, 300, 0, 230}) {
		t.Fatalf("hours 10 to 13: %v", got)
	}
	if got := h.Current(at(13, 59)); got != 230 {
		t.Fatalf("hour 13 so far: %d", got)
	}
	h.Observe(at(38, 0), 100) // over a day later: hours 14 to 37 start empty, 13 is gone
	if got := h.Before(at(38, 0), 23); slices.Max(got) != 0 || h.Current(at(38, 0)) != 20 {
		t.Fatalf("a day on: %v, current %d", got, h.Current(at(38, 0)))
	}
}
