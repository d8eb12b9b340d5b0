package channel

import (
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

// SetPosition moves the cursor back or forward to a boundary; messages
// still in flight are not queued a second time when read again.
func TestSetPositionReplaysWithoutDuplicatingInFlight(t *testing.T) {
	c, msgs := newLoaded(t, 5, Config{}, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute) // 1 in flight
	for _, id := range ids(c.Take(1, 4, t0, time.Minute)) {
		c.Fin(1, id)
	}
	c.SetPosition(0, 0)
	if st := c.Stats(); st.Confirmed != 0 || st.ConfirmedCount != 0 || st.InFlight != 1 {
		t.Fatalf("after moving back: %+v", st)
	}
	from, _, _ := c.WantRead()
	c.Loaded(msgs[from/40:], t0)
	if got := ids(c.Take(1, 10, t0, time.Minute)); len(got) != 4 || got[0] != 2 {
		t.Fatalf("replayed %v, want 2..5 (1 is still in flight)", got)
	}
	c.SetPosition(160, 4)
	if st := c.Stats(); st.Confirmed != 160 || st.Depth != 1 {
		t.Fatalf("after moving forward: %+v", st)
	}
}
