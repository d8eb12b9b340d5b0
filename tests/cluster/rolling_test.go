package cluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// rollingRestartMaxUnavailable bounds, on builds without -race, the
// longest stretch without an acknowledged publish while each node in turn
// stops gracefully and starts again: a stopping leader hands its
// partitions over at once, so writes pause for an election, not a lease.
const rollingRestartMaxUnavailable = time.Second

// The usual upgrade: every node in turn is stopped with SIGTERM and
// started again, the next one only once every replica is back in sync,
// while the fault suite's clients publish and consume. Nothing
// acknowledged is lost, ordered messages stay in order, and writes pause
// only briefly.
func TestRollingRestartUnderLoad(t *testing.T) {
	f := startFaultLab(t)
	w := startWorkload(f)
	from := time.Now()
	var windows []faultWindow
	for _, id := range f.ids {
		stopped := time.Now()
		took := f.nodes[id].Terminate(t, 30*time.Second)
		f.start(id)
		// Back in sync: every ISR full again and the restarted node past
		// where each leader stood once it was running, so the ISR is not
		// merely the one from before it noticed its own restart.
		var ends map[partitionKey]int64
		testnode.Eventually(t, 30*time.Second, "every leader's log end", func() bool { ends = f.leaderEnds(w.topics); return ends != nil })
		testnode.Eventually(t, 60*time.Second, "every replica in sync after restarting "+id, func() bool {
			return f.healthy(w.topics) && f.reached(id, ends)
		})
		t.Logf("%s: stopped in %v, every replica in sync %v after its SIGTERM", id, took.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
		windows = append(windows, faultWindow{kind: "restart of " + id, from: stopped, to: time.Now()})
	}
	v := w.finish(from, time.Now())
	t.Logf("%v", v)
	all, ordered := w.h.unavailabilityByKind(windows)
	for _, win := range windows {
		t.Logf("%s: longest stretch without an acknowledged publish %v, on the ordered partition %v", win.kind, all[win.kind][0].Round(time.Millisecond), ordered[win.kind][0].Round(time.Millisecond))
	}
	if !v.ok() {
		t.Error(v.problems())
	}
	if !raceEnabled && (v.MaxUnavailable > rollingRestartMaxUnavailable || v.MaxUnavailableOrdered > rollingRestartMaxUnavailable) {
		t.Errorf("writes paused %v (ordered partition %v) during the rolling restart, want at most %v",
			v.MaxUnavailable.Round(time.Millisecond), v.MaxUnavailableOrdered.Round(time.Millisecond), rollingRestartMaxUnavailable)
	}
}

type partitionKey struct {
	topic     string
	partition int
}

// leaderEnds is each partition's committed log end on its leader, or nil
// when a leader does not answer.
func (f *faultLab) leaderEnds(topics map[string]int) map[partitionKey]int64 {
	ends := map[partitionKey]int64{}
	for topic, parts := range topics {
		for p := range parts {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, ok, err := f.assign.Get(ctx, topic, int32(p))
			cancel()
			leader := f.nodes[st.Leader]
			if err != nil || !ok || leader == nil {
				return nil
			}
			end, ok := logEnd(leader.HTTP, topic, p)
			if !ok {
				return nil
			}
			ends[partitionKey{topic, p}] = end
		}
	}
	return ends
}

// reached is whether node id committed every partition up to ends.
func (f *faultLab) reached(id string, ends map[partitionKey]int64) bool {
	for k, want := range ends {
		if got, ok := logEnd(f.nodes[id].HTTP, k.topic, k.partition); !ok || got < want {
			return false
		}
	}
	return true
}

// logEnd reads a partition's committed log end from a node's /metrics.
func logEnd(hostport, topic string, partition int) (int64, bool) {
	v, err := testnode.MetricValue(hostport, "partita_partition_log_end_bytes", fmt.Sprintf(`partition="%d",topic="%s"`, partition, topic))
	if err != nil || v == "" {
		return 0, false
	}
	end, err := strconv.ParseFloat(v, 64)
	return int64(end), err == nil
}
