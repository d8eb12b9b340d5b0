package broker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// takingLeader is a leader that writes every publish it is sent.
func takingLeader(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var took atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		took.Add(1)
		w.Write([]byte("OK"))
	}))
	t.Cleanup(s.Close)
	return s, &took
}

// A forward the leader refused as led elsewhere, writing nothing, waits
// for the view to name the next leader and goes there; one it failed in
// flight as its leadership ended may be in the next leader's log, and
// fails.
func TestForwardRefusedAsLedElsewhereGoesToTheNextLeader(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		sentOn       bool
	}{
		{"refused, nothing written", ElsewhereCode, true},
		{"failed in flight", "FAILED_ON_NOT_LEADER", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, took := takingLeader(t)
			former := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"message":"` + c.answer + `"}`))
			}))
			defer former.Close()
			b := brokerWithLeader("n2", former.Listener.Addr().String())
			b.setNodes([]cluster.NodeInfo{{ID: "n2", HTTPAddress: former.Listener.Addr().String()}, {ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
			done := make(chan *topic.Error, 1)
			go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
			if c.sentOn {
				eventually(t, "the forward to wait for the next leader", func() bool { return b.Admission().ForwardsWaiting == 1 })
				b.setPartition(leads(partitionKey{"t", 0}, "n3"))
				if err := <-done; err != nil {
					t.Fatalf("after n3 was elected the forward answered %v; want n3's OK", err)
				}
			} else if err := <-done; err == nil || err.Code != "E_FAILED_ON_NOT_LEADER" || err.Elsewhere {
				t.Fatalf("the forward answered %+v; want E_FAILED_ON_NOT_LEADER from the former leader", err)
			}
			want, sentOn := int64(0), int64(0)
			if c.sentOn {
				want, sentOn = 1, 1
			}
			if n := took.Load(); n != want {
				t.Errorf("the next leader took %d publishes; want %d", n, want)
			}
			if n := b.Admission().SentOn; n != sentOn {
				t.Errorf("%d publishes counted as sent on; want %d", n, sentOn)
			}
		})
	}
}

// In a batch, only the forwards the leader refused as led elsewhere are
// free to go on to the next leader: written, failed and in-flight answers
// stand.
func TestForwardsBatchFreesOnlyTheUnwritten(t *testing.T) {
	answers := []string{ElsewhereCode, "FAILED_ON_NOT_LEADER", "", "PUB_TOO_MUCH_WAITING"}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		var out []byte
		for i := len(answers) - 1; i >= 0; i-- {
			out = AppendForwardAnswer(out, i, answers[i])
		}
		w.Write(out)
	}))
	defer leader.Close()
	b := brokerWithLeader("n2", leader.Listener.Addr().String())
	batch := make([]*queuedForward, len(answers))
	done := make([]chan forwardResult, len(answers))
	for i := range batch {
		done[i] = make(chan forwardResult, 1)
		batch[i] = &queuedForward{Forward: Forward{Topic: "t", Bodies: [][]byte{[]byte("m")}}, ctx: t.Context(), ended: t.Context(), done: done[i]}
	}
	b.postForwards(cluster.NodeInfo{ID: "n2", HTTPAddress: leader.Listener.Addr().String()}, batch)
	for i, want := range []bool{false, true, true, true} {
		r := <-done[i]
		if r.sent != want || (answers[i] == "") != (r.err == nil) {
			t.Errorf("answer %q: sent %v, error %v; want sent %v", answers[i], r.sent, r.err, want)
		}
	}
}

// deposingPartition stands in for a leader deposed with publishes
// queued: it holds each publish until release closes, then refuses it
// with err.
type deposingPartition struct {
	got     chan struct{}
	release chan struct{}
	err     *topic.Error
}

func (d *deposingPartition) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*topic.Published); ok {
		d.got <- struct{}{}
		<-d.release
		m.Reply(topic.Reply{Err: d.err})
	}
}

// A client's publish that this node's deposed leadership refused, never
// written, goes on to the next leader; one that failed in flight does
// not, and neither does a publish another node forwarded here, whose
// forwarder sends it on.
func TestPublishRefusedByADeposedLeaderGoesToTheNextLeader(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       *topic.Error
		forwarded bool
		wantTaken bool
	}{
		{"queued", topic.ErrDeposed, false, true},
		{"in flight", topic.ErrLeadershipEnded, false, false},
		{"forwarded here", topic.ErrDeposed, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, tp, _ := viewBroker(t)
			part := &deposingPartition{got: make(chan struct{}, 1), release: make(chan struct{}), err: c.err}
			tp.slot(0).pid.Store(b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return part })))
			next, took := takingLeader(t)
			key := partitionKey{"t", 0}
			b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
			b.setPartition(atEpoch(leads(key, "n1"), 1))
			tp.slot(0).lead(true)

			replies := make(chan topic.Reply, 1)
			var fwd Forwarded
			if c.forwarded {
				fwd = Forwarded{By: "n2", SeenEpoch: 1, Deadline: time.Now().Add(5 * time.Second)}
			}
			b.send(tp, 0, [][]byte{[]byte("m")}, 0, fwd, nil, func(r topic.Reply) { replies <- r })
			<-part.got
			// As the watch tells it: the view first, then the slot, then
			// the actor, which refuses what it held.
			b.setPartition(atEpoch(leads(key, "n3"), 2))
			tp.slot(0).lead(false)
			close(part.release)
			r := <-replies
			if c.wantTaken && r.Err != nil {
				t.Fatalf("answered %v; want the next leader's OK", r.Err)
			}
			if !c.wantTaken && r.Err != c.err {
				t.Fatalf("answered %v; want %v", r.Err, c.err)
			}
			want := int64(0)
			if c.wantTaken {
				want = 1
			}
			if n := took.Load(); n != want {
				t.Errorf("the next leader took %d publishes; want %d", n, want)
			}
			if n := b.Admission().SentOn; n != want {
				t.Errorf("%d publishes counted as sent on; want %d", n, want)
			}
		})
	}
}

// A forward in flight when its leadership moves waits the move grace for
// the former leader's answer while that leader is still registered, and
// goes on to the next leader with what it never wrote; one to a leader
// gone from the live nodes, or that leaves them during the grace, fails
// at once.
func TestForwardInFlightAtAMoveWaitsForTheFormerLeadersAnswer(t *testing.T) {
	const grace = 2 * time.Second
	for _, c := range []struct {
		name             string
		registered, goes bool
	}{
		{"former leader registered", true, false},
		{"former leader gone", false, false},
		{"former leader gone during the grace", true, true},
	} {
		registered := c.registered && !c.goes
		t.Run(c.name, func(t *testing.T) {
			next, took := takingLeader(t)
			arrived, answer := make(chan struct{}, 1), make(chan struct{})
			former := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				arrived <- struct{}{}
				select {
				case <-answer:
				case <-r.Context().Done():
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"message":"` + ElsewhereCode + `"}`))
			}))
			defer former.Close()
			defer close(answer)
			b := brokerWithLeader("n2", former.Listener.Addr().String())
			b.cfg.ForwardMoveGrace = grace
			if !registered {
				// Waited out, the grace would outlast the test.
				b.cfg.ForwardMoveGrace = time.Hour
			}
			nodes := []cluster.NodeInfo{{ID: "n3", HTTPAddress: next.Listener.Addr().String()}}
			withFormer := append(nodes, cluster.NodeInfo{ID: "n2", HTTPAddress: former.Listener.Addr().String()})
			if c.registered {
				nodes = withFormer
			}
			done := make(chan *topic.Error, 1)
			go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
			<-arrived
			b.setNodes(nodes)
			moved := time.Now()
			b.setPartition(leads(partitionKey{"t", 0}, "n3"))
			if c.goes {
				eventually(t, "the move to reach the view", func() bool { return b.currentView().leader(partitionKey{"t", 0}).node == "n3" })
				b.setNodes(withFormer[:1])
			}
			if !registered {
				select {
				case err := <-done:
					if err == nil || err.Code != "E_FAILED_ON_NOT_WRITABLE" {
						t.Fatalf("the forward to a leader gone answered %v; want E_FAILED_ON_NOT_WRITABLE", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the forward to a leader gone still waits for its answer 30 s after the move")
				}
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the forward to the former leader answered %v before its answer, %v after the move", err, time.Since(moved))
			case <-time.After(grace / 4):
			}
			answer <- struct{}{}
			if err := <-done; err != nil {
				t.Fatalf("the forward the former leader refused as never written answered %v; want n3's OK", err)
			}
			if n := took.Load(); n != 1 {
				t.Fatalf("the next leader took %d publishes; want 1", n)
			}
		})
	}
}
