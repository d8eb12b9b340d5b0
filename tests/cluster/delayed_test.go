package cluster

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
	"github.com/partitamq/partita/storage"
)

// delayFlags make a REQ of more than a second go to the log, and channel
// offsets reach the disk quickly so the tests can wait for them there.
var delayFlags = []string{"--req-to-end-threshold", "1s", "--channel-persist-interval", "50ms"}

const reqDelay = 4 * time.Second

// reqLong subscribes to topic/ch on addr, takes the one message there and
// REQs it for reqDelay. It returns the message and when its delay ends.
func reqLong(t *testing.T, addr, topic string) (protocol.Message, time.Time) {
	t.Helper()
	c := dialRaw(t, addr)
	c.send("SUB " + topic + " ch")
	if typ, data := c.frame(10 * time.Second); typ != protocol.FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("SUB answered %d %q", typ, data)
	}
	c.send("RDY 1")
	m := c.message()
	var id [16]byte
	protocol.FormatMessageID(id[:], m.ID)
	due := time.Now().Add(reqDelay)
	c.send(fmt.Sprintf("REQ %s %d", id[:], reqDelay.Milliseconds()))
	c.conn.Close()
	return m, due
}

// confirmedOnDisk waits until a node's saved state of topic/ch (partition 0)
// has confirmed past the original: its delayed copy is committed.
func confirmedOnDisk(t *testing.T, dataPath, topic string) {
	t.Helper()
	dir := filepath.Join(dataPath, "topics", topic, "0")
	testnode.Eventually(t, 10*time.Second, "the original confirmed on disk in "+dataPath, func() bool {
		st, ok, err := storage.LoadChannelState(dir, "ch")
		return err == nil && ok && st.Confirmed > 0
	})
}

// delayedCopyArrives subscribes on addr and expects the copy: same body, a
// new ID, the attempt counted, and not before its time.
func delayedCopyArrives(t *testing.T, addr, topic string, orig protocol.Message, due time.Time) {
	t.Helper()
	c := dialRaw(t, addr)
	c.send("SUB " + topic + " ch")
	if typ, data := c.frame(10 * time.Second); typ != protocol.FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("SUB answered %d %q", typ, data)
	}
	c.send("RDY 10")
	typ, data := c.frame(reqDelay + 20*time.Second)
	got := time.Now()
	if typ != protocol.FrameTypeMessage {
		t.Fatalf("frame %d %q, want the delayed copy", typ, data)
	}
	m, err := protocol.DecodeMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != string(orig.Body) || m.ID == orig.ID || m.Attempts != orig.Attempts+1 {
		t.Fatalf("got %x %q attempt %d, want a new ID for %x %q at attempt %d", m.ID, m.Body, m.Attempts, orig.ID, orig.Body, orig.Attempts+1)
	}
	if got.Before(due.Add(-100 * time.Millisecond)) {
		t.Fatalf("delayed copy delivered %v before its time", due.Sub(got))
	}
	c.fin(m)
}

// Behaviour 20 across a crash: a REQ beyond the threshold is in the log,
// so after kill -9 and a restart the message still arrives after its delay,
// under a new ID, and the original is not delivered again.
func TestLongREQSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	p := testnode.StartProcess(t, dir, delayFlags...)
	prod := producer(t, p.TCP)
	if err := prod.Publish("delayed", []byte("later")); err != nil {
		t.Fatal(err)
	}
	orig, due := reqLong(t, p.TCP, "delayed")
	confirmedOnDisk(t, dir, "delayed")
	p.Kill(t)

	p2 := testnode.StartProcess(t, dir, delayFlags...)
	delayedCopyArrives(t, p2.TCP, "delayed", orig, due)
}

// Behaviour 20 across a failover: the copy is replicated like a write, so
// the new leader delivers it after the delay.
func TestLongREQSurvivesFailover(t *testing.T) {
	c := startCluster(t, 3, delayFlags...)
	st := c.createTopic("delayedha", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=delayedha&channel=ch", "")
	if err := producer(t, leader.TCP).Publish("delayedha", []byte("later")); err != nil {
		t.Fatal(err)
	}
	orig, due := reqLong(t, leader.TCP, "delayedha")
	for _, f := range c.followers(st) {
		confirmedOnDisk(t, c.nodes[f].DataPath, "delayedha")
	}
	leader.Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("delayedha", 0).Leader
		return next != "" && next != st.Leader
	})
	delayedCopyArrives(t, c.nodes[next].TCP, "delayedha", orig, due)
}
