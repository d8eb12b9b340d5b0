package broker

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// A batch decodes to the publishes encoded, deadlines and epochs with
// them; one cut short, running on, with a message past the limit or a
// publish of no message is an error, not a partial batch.
func TestForwardsBatchDecodesWhatItEncodes(t *testing.T) {
	at := time.Unix(1_700_000_000, 42)
	batch := []Forward{
		{Topic: "a", Partition: 3, SeenEpoch: 9, Deadline: at, Bodies: [][]byte{[]byte("one"), []byte("two")}},
		{Topic: "bb", Partition: 0, Bodies: [][]byte{{}}},
	}
	got, err := DecodeForwards(EncodeForwards(batch), 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Deadline.Equal(at) || !got[1].Deadline.IsZero() {
		t.Fatalf("decoded %+v", got)
	}
	got[0].Deadline = at
	if !reflect.DeepEqual(got[0], batch[0]) || got[1].Topic != "bb" || len(got[1].Bodies) != 1 || len(got[1].Bodies[0]) != 0 {
		t.Fatalf("decoded %+v, want %+v", got, batch)
	}

	full := EncodeForwards(batch)
	empty := EncodeForwards([]Forward{{Topic: "a"}})
	for name, body := range map[string][]byte{
		"cut short":          full[:len(full)-1],
		"running on":         append(append([]byte(nil), full...), 0),
		"message past limit": EncodeForwards([]Forward{{Topic: "a", Bodies: [][]byte{make([]byte, 17)}}}),
		"no message":         empty,
		"count past body":    {0xff, 0xff, 0xff, 0xff},
	} {
		if fs, err := DecodeForwards(body, 16); !errors.Is(err, ErrBadForwards) {
			t.Errorf("%s: decoded %+v, %v; want ErrBadForwards", name, fs, err)
		}
	}
}

// A publish waiting for a connection to a leader whose every connection
// is held is never sent there once the partition's leadership moves: it
// goes to the next leader, and the held forwards stay where they are.
func TestQueuedForwardGoesToTheNextLeader(t *testing.T) {
	stuck, arrived := stuckLeader(t, forwardConns)
	var nextGot atomic.Int64
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nextGot.Add(1)
		w.Write([]byte("OK"))
	}))
	defer next.Close()
	b := brokerWithLeader("n2", stuck.Listener.Addr().String())
	b.setNodes([]cluster.NodeInfo{{ID: "n2", HTTPAddress: stuck.Listener.Addr().String()}, {ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
	key := partitionKey{"t", 0}
	b.setPartition(leads(key, "n2"))
	held := make(chan *topic.Error, forwardConns)
	for range forwardConns {
		go func() { held <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("held")}, 0) }()
	}
	for range forwardConns {
		<-arrived
	}
	queued := make(chan *topic.Error, 1)
	go func() { queued <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("queued")}, 0) }()
	eventually(t, "the publish to queue for a connection", func() bool { return b.Admission().ForwardsQueued == 1 })
	b.setPartition(leads(key, "n3"))
	select {
	case err := <-queued:
		if err != nil {
			t.Fatalf("the queued forward answered %v after the leadership moved, want the next leader's OK", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the queued forward still waits 5 s after the leadership moved")
	}
	if nextGot.Load() != 1 {
		t.Fatalf("the next leader got %d publishes, want 1", nextGot.Load())
	}
	select {
	case <-arrived:
		t.Fatal("the former leader got the queued publish")
	default:
	}
}
