package broker

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// acceptingPartition stands in for a partition actor that takes every
// publish.
type acceptingPartition struct{ took chan struct{} }

func (a *acceptingPartition) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*topic.Published); ok {
		a.took <- struct{}{}
		m.Reply(topic.Reply{})
	}
}

// viewBroker is a broker of node n1 with an actor system, and a topic "t"
// of one partition whose replica here is a stand-in that takes publishes
// (when the slot says it leads).
func viewBroker(t *testing.T) (*Broker, *Topic, *acceptingPartition) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	b := &Broker{cfg: Config{NodeID: "n1", Assignments: cluster.NewAssignments(nil, ""), ForwardTimeout: 5 * time.Second}, system: system}
	part := &acceptingPartition{took: make(chan struct{}, 1)}
	tp := &Topic{Name: "t"}
	tp.slots.Store(newSlots(1))
	tp.slot(0).pid.Store(system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return part })))
	return b, tp, part
}

func atEpoch(st cluster.PartitionState, epoch int64) cluster.PartitionState {
	st.EpochForWrite, st.Revision = epoch, epoch
	return st
}

// A publish forwarded to this node from a view newer than its own (the
// forwarder saw this node elected; this node's watch has not said so yet)
// waits for the replica to lead and is written; one forwarded from a view
// no newer, which names another leader, is refused at once. Both are
// counted as misdirected; a forward to this node leading is not.
func TestForwardedPublishWaitsForTheElectionToReachThisNode(t *testing.T) {
	b, tp, part := viewBroker(t)
	key := partitionKey{"t", 0}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n2", HTTPAddress: "127.0.0.1:1"}})
	b.setPartition(atEpoch(leads(key, "n2"), 1))
	replies := make(chan topic.Reply, 1)
	reply := func(r topic.Reply) { replies <- r }
	deadline := time.Now().Add(5 * time.Second)

	b.publishHere(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{By: "n3", SeenEpoch: 1, Deadline: deadline}, reply)
	if r := <-replies; r.Err == nil || r.Err.Code != topic.ErrNotLeader.Code {
		t.Fatalf("a forward from a view no newer than n2's leadership answered %+v, want %s at once", r, topic.ErrNotLeader.Code)
	}

	b.publishHere(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{By: "n3", SeenEpoch: 2, Deadline: deadline}, reply)
	eventually(t, "the forward to wait for this node to lead", func() bool { return b.Admission().ForwardsWaiting == 1 })
	select {
	case r := <-replies:
		t.Fatalf("answered %+v before this node led", r)
	default:
	}
	b.setPartition(atEpoch(leads(key, "n1"), 2))
	tp.slot(0).lead(true)
	<-part.took
	if r := <-replies; r.Err != nil {
		t.Fatalf("after this node was elected the forwarded publish answered %v", r.Err)
	}
	// What a stopping node waits on: forwards its peers still send it.
	if n := b.MisdirectedForwards(); n != 2 {
		t.Fatalf("%d forwards counted as reaching a node that did not lead, want 2", n)
	}
	b.publishHere(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{By: "n3", SeenEpoch: 2, Deadline: deadline}, reply)
	<-part.took
	if r := <-replies; r.Err != nil || b.MisdirectedForwards() != 2 {
		t.Fatalf("a forward to the leader answered %v and made the count %d, want nil and 2", r.Err, b.MisdirectedForwards())
	}
}

// A publish this node would forward to the leader its view names, when
// that is this node itself (the view has the election, the replica not
// yet), waits for the replica and is written here.
func TestPublishWhoseViewNamesThisNodeWaitsForItsReplica(t *testing.T) {
	b, tp, part := viewBroker(t)
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}})
	b.setPartition(atEpoch(leads(partitionKey{"t", 0}, "n1"), 2))
	replies := make(chan topic.Reply, 1)
	b.Publish(tp, 0, [][]byte{[]byte("m")}, 0, func(r topic.Reply) { replies <- r })
	eventually(t, "the publish to wait for the replica", func() bool { return b.Admission().ForwardsWaiting == 1 })
	tp.slot(0).lead(true)
	<-part.took
	if r := <-replies; r.Err != nil {
		t.Fatalf("after the replica led the publish answered %v", r.Err)
	}
}

// A forward to a leader whose host refuses connections never reached it:
// it waits for the view to name the next leader and goes there.
func TestForwardRefusedByADeadLeaderGoesToItsSuccessor(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("OK"))
	}))
	defer next.Close()
	b := brokerWithLeader("n2", deadAddr)
	b.setNodes([]cluster.NodeInfo{{ID: "n2", HTTPAddress: deadAddr}, {ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
	done := make(chan *topic.Error, 1)
	go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
	eventually(t, "the forward to wait for the next leader", func() bool { return b.Admission().ForwardsWaiting == 1 })
	b.setPartition(leads(partitionKey{"t", 0}, "n3"))
	if err := <-done; err != nil {
		t.Fatalf("after n3 was elected the forward answered %v", err)
	}
}

// A forwarded publish waiting for this node to lead is refused, and never
// written, once its forwarder gives up on it, and waits no longer than
// this node's own forward timeout whatever deadline it carries.
func TestForwardedPublishWaitEndsWithItsForwarder(t *testing.T) {
	b, tp, part := viewBroker(t)
	b.cfg.ForwardTimeout = 100 * time.Millisecond
	key := partitionKey{"t", 0}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n2", HTTPAddress: "127.0.0.1:1"}})
	b.setPartition(atEpoch(leads(key, "n2"), 1))
	replies := make(chan topic.Reply, 1)
	reply := func(r topic.Reply) { replies <- r }

	request, abandon := context.WithCancel(t.Context())
	b.publishHere(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{By: "n3", SeenEpoch: 2, Deadline: time.Now().Add(time.Hour), Request: request}, reply)
	eventually(t, "the forward to wait for this node to lead", func() bool { return b.Admission().ForwardsWaiting == 1 })
	abandon()
	if r := <-replies; r.Err == nil || r.Err.Code != topic.ErrNotLeader.Code {
		t.Fatalf("an abandoned forward answered %+v, want %s", r, topic.ErrNotLeader.Code)
	}

	start := time.Now()
	b.publishHere(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{By: "n3", SeenEpoch: 2, Deadline: time.Now().Add(time.Hour)}, reply)
	if r := <-replies; r.Err == nil || r.Err.Code != topic.ErrNotLeader.Code {
		t.Fatalf("a forward that waited out the timeout answered %+v, want %s", r, topic.ErrNotLeader.Code)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v for a deadline an hour away; the forward timeout is 100ms", waited)
	}
	tp.slot(0).lead(true)
	select {
	case <-part.took:
		t.Fatal("a refused forward was written once the node led")
	case <-time.After(50 * time.Millisecond):
	}
}

// The states leader changes start from are the newest the watch
// delivered: an older one arriving late is not kept, and a deleted
// partition is forgotten.
func TestKnownStatesKeepTheNewest(t *testing.T) {
	var k knownStates
	ref := cluster.PartitionRef{Topic: "t", Partition: 0}
	newer := atEpoch(leads(partitionKey{"t", 0}, "n2"), 5)
	k.set(newer)
	k.set(atEpoch(leads(partitionKey{"t", 0}, "n3"), 4))
	if st, ok := k.get(ref); !ok || st.Leader != "n2" || st.Revision != 5 {
		t.Fatalf("known %+v (%v), want the newer state led by n2", st, ok)
	}
	k.set(cluster.PartitionState{Topic: "t", Partition: 0})
	if st, ok := k.get(ref); ok {
		t.Fatalf("a deleted partition still known: %+v", st)
	}
}
