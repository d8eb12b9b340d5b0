package broker

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/channel"
)

// The watch may bring a channel's older state after this node stored and
// applied a newer one itself (its creation's event after /channel/setorder
// made it ordered): the older state must not undo the newer. Here the
// channel is made ordered, then its creation's state (unordered) arrives:
// a consumer with room for two still gets one message at a time.
func TestAnOlderChannelStateDoesNotUndoANewerOne(t *testing.T) {
	b, tp := soloTopic(t)
	if err := b.CreateChannel(t.Context(), tp, "c"); err != nil {
		t.Fatal(err)
	}
	created, found, err := b.meta.Channel(t.Context(), tp.Name, "c")
	if err != nil || !found {
		t.Fatal(found, err)
	}
	if err := b.SetChannelOrdered(t.Context(), tp, "c", true); err != nil {
		t.Fatal(err)
	}
	b.applyChannelMeta(tp, created) // the creation's event, late
	for _, m := range []string{"1", "2"} {
		if r := b.PublishWait(tp, 0, [][]byte{[]byte(m)}, 0, Forwarded{}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	_, in := subscribed(t, b, tp)
	if d := received(t, in); string(d.Body) != "1" {
		t.Fatalf("first delivery %q", d.Body)
	}
	pids, err := tp.channelPIDs(b.system, "c")
	if err != nil {
		t.Fatal(err)
	}
	var st channel.Snapshot
	for range 2 { // the second answer comes after any delivery the first's turn queued
		res, err := b.system.Root.RequestFuture(pids[0], &channel.StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		st = *res.(*channel.Snapshot)
	}
	if st.Stats.InFlight != 1 {
		t.Fatalf("%d in flight on a channel made ordered before its older state arrived, want 1", st.Stats.InFlight)
	}
}
