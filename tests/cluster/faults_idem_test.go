package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// The fault suite's idempotent producers: MPUB_EXT batches of named
// messages to an ext topic of two partitions, each batch sent to its
// partition's leader again and again until answered OK, then once more,
// as a producer that lost the answer does, one batch per interval: the
// checker reads every message back by its own request. On idem, whose dedupe window
// is longer than a CI run, the checker wants every acknowledged ID in the
// log and no ID twice within the window; on noidem, the same producer
// without a window, duplicates show that the checker sees them.

const (
	idemPerBatch = 10
	idemWindow   = 10 * time.Minute
)

// idemStream is one such producer and what it was answered.
type idemStream struct {
	f      *faultLab
	topic  string
	window time.Duration // 0: the topic has none
	every  time.Duration // between batches
	mu     sync.Mutex
	acked  map[string]bool // IDs of the batches answered OK
	stop   chan struct{}
	done   sync.WaitGroup
}

// startIdemStream creates the topic and starts publishing; topics gains
// it, so the nemesis waits for its replicas too.
func startIdemStream(f *faultLab, name string, window, every time.Duration, topics map[string]int) *idemStream {
	q := fmt.Sprintf("/topic/create?topic=%s&partition_num=2&replicator=3&extend=true", name)
	if window > 0 {
		q += "&dedupe_window=" + window.String()
	}
	if code, body := testnode.Post(f.t, f.nodes["n2"].HTTP, q, ""); code != 200 {
		f.t.Fatalf("create %s: %d %s", name, code, body)
	}
	topics[name] = 2
	s := &idemStream{f: f, topic: name, window: window, every: every, acked: map[string]bool{}, stop: make(chan struct{})}
	s.done.Add(1)
	go s.publish()
	return s
}

// publish sends batch 0, 1, ... to partition k%2 until stopped.
func (s *idemStream) publish() {
	defer s.done.Done()
	for k := 0; ; k++ {
		body, p := idBatch(k, idemPerBatch), int32(k%2)
		for range 2 { // the second send is the retry of a lost answer
			for !s.f.publishVia(s.f.memberTCP, s.topic, p, body) {
				if !wait(s.stop, 100*time.Millisecond) {
					return
				}
			}
			s.mu.Lock()
			for j := range idemPerBatch {
				s.acked[fmt.Sprintf("%d-%d", k, j)] = true
			}
			s.mu.Unlock()
		}
		if !wait(s.stop, s.every) {
			return
		}
	}
}

// idemVerdict is what the checker found in an idempotent stream's topic.
type idemVerdict struct {
	topic      string
	acked      int // IDs answered OK
	lost       []string
	duplicates int // copies of an ID within the window of an earlier one
}

func (v idemVerdict) String() string {
	return fmt.Sprintf("%s: %d IDs acknowledged, %d lost, %d duplicates within the window", v.topic, v.acked, len(v.lost), v.duplicates)
}

// finish stops the producer and reads the topic's log.
func (s *idemStream) finish() idemVerdict {
	close(s.stop)
	s.done.Wait()
	window := s.window
	if window == 0 {
		window = idemWindow // the same yardstick as idem's
	}
	logged := s.f.loggedIDTimes(s.topic, 2)
	v := idemVerdict{topic: s.topic, acked: len(s.acked)}
	for id := range s.acked {
		if len(logged[id]) == 0 {
			v.lost = append(v.lost, id)
		}
	}
	for _, stamps := range logged {
		for i := 1; i < len(stamps); i++ {
			for j := range i {
				if d := time.Duration(stamps[i] - stamps[j]); d < window && d > -window {
					v.duplicates++
					break
				}
			}
		}
	}
	return v
}
