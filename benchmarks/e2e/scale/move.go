package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The move phase (--move-mib): one partition of two replicas filled with
// --move-mib MiB has its follower's replica moved to the third node, at
// the nodes' --catchup-rate-limit, while the steady load publishes to the
// run's other partitions. The steady load before it, over the same
// partitions at the same rate with the big partition already filled, is
// the figure without a move.

const moveTopic = "move_big"

// moveFigures are the move phase's results.
type moveFigures struct {
	MiB     int     `json:"mib"`
	From    string  `json:"from,omitempty"`
	To      string  `json:"to,omitempty"`
	FillS   float64 `json:"fill_s"`
	Seconds float64 `json:"seconds"` // asked until the state shows it done; -1 never
	MiBPerS float64 `json:"mib_per_s"`
	// LoadWithin says the load ran entirely while the move did: its
	// latencies are the move's.
	LoadWithin bool        `json:"load_within"`
	Load       loadFigures `json:"load"`
}

// moveReplicas is /lookup?metainfo=true's view of the big partition.
type moveReplicas struct {
	Leader   string   `json:"leader"`
	ISR      []string `json:"isr"`
	Catchup  []string `json:"catchup"`
	MovingIn []string `json:"moving_in"`
}

func (r moveReplicas) settled(isr int) bool {
	return r.Leader != "" && len(r.ISR) == isr && len(r.Catchup) == 0 && len(r.MovingIn) == 0
}

func readMoveReplicas(ctx context.Context, n *node) (moveReplicas, error) {
	body, err := httpGet(ctx, "http://"+n.http+"/lookup?metainfo=true&topic="+moveTopic, 5*time.Second)
	if err != nil {
		return moveReplicas{}, err
	}
	var doc struct {
		Replication map[string]moveReplicas `json:"replication"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return moveReplicas{}, err
	}
	return doc.Replication["0"], nil
}

// waitMoveReplicas polls until ok holds of the big partition's replicas or
// limit passes, and returns the last reading.
func waitMoveReplicas(ctx context.Context, n *node, limit time.Duration, ok func(moveReplicas) bool) (moveReplicas, bool) {
	deadline := time.Now().Add(limit)
	for {
		r, err := readMoveReplicas(ctx, n)
		if err == nil && ok(r) {
			return r, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *cluster) byID(id string) *node {
	for _, n := range c.nodes {
		if fmt.Sprintf("n%d", n.idx) == id {
			return n
		}
	}
	return nil
}

// fillForMove creates the big partition on two nodes and publishes
// cfg.moveMiB MiB to it in MPUBs of 1 MiB, each answered before the next.
func fillForMove(ctx context.Context, c *cluster, cfg config, res *runResult) bool {
	m := &res.Move
	m.MiB, m.Seconds = cfg.moveMiB, -1
	via := c.nodes[0]
	if _, err := httpDo(ctx, http.MethodPost, "http://"+via.http+"/topic/create?topic="+moveTopic+"&partition_num=1&replicator=2", 30*time.Second); err != nil {
		res.fail("move: create: " + err.Error())
		return false
	}
	r, ok := waitMoveReplicas(ctx, via, time.Minute, func(r moveReplicas) bool { return r.settled(2) })
	if !ok {
		res.fail(fmt.Sprintf("move: %s/0 not on two nodes in sync within a minute: %+v", moveTopic, r))
		return false
	}
	leader := c.byID(r.Leader)
	msg := strings.Repeat("m", 1023)
	batch := strings.Repeat(msg+"\n", 1023) + msg // 1024 messages of 1 KiB
	start := time.Now()
	for i := range cfg.moveMiB {
		if _, err := httpPost(ctx, "http://"+leader.http+"/mpub?topic="+moveTopic, batch, time.Minute); err != nil {
			res.fail(fmt.Sprintf("move: fill, MiB %d: %v", i, err))
			return false
		}
	}
	m.FillS = time.Since(start).Seconds()
	if r, ok = waitMoveReplicas(ctx, via, 5*time.Minute, func(r moveReplicas) bool { return r.settled(2) }); !ok {
		res.fail(fmt.Sprintf("move: the follower not in sync after the fill: %+v", r))
		return false
	}
	return true
}

// runMove moves the big partition's follower replica to the node without
// one and runs the steady load meanwhile.
func runMove(ctx context.Context, c *cluster, parts []partition, cfg config, res *runResult) {
	m := &res.Move
	via := c.nodes[0]
	r, err := readMoveReplicas(ctx, via)
	if err != nil || !r.settled(2) {
		res.fail(fmt.Sprintf("move: before the move: %+v %v", r, err))
		return
	}
	for _, n := range c.nodes {
		id := fmt.Sprintf("n%d", n.idx)
		switch {
		case slices.Contains(r.ISR, id) && id != r.Leader:
			m.From = id
		case !slices.Contains(r.ISR, id):
			m.To = id
		}
	}
	q := url.Values{"topic": {moveTopic}, "partition": {"0"}, "move_from": {m.From}, "move_to": {m.To}}
	start := time.Now()
	if _, err := httpDo(ctx, http.MethodPost, "http://"+via.http+"/topic/partition/move?"+q.Encode(), 30*time.Second); err != nil {
		res.fail("move: ask: " + err.Error())
		return
	}
	done := make(chan float64, 1)
	go func() {
		moved := func(r moveReplicas) bool {
			return r.settled(2) && slices.Contains(r.ISR, m.To) && !slices.Contains(r.ISR, m.From)
		}
		if _, ok := waitMoveReplicas(ctx, via, cfg.moveTimeout, moved); ok {
			done <- time.Since(start).Seconds()
			return
		}
		done <- -1
	}()
	runLoad(ctx, c, parts, cfg, &m.Load)
	m.Seconds = <-done
	if m.Seconds < 0 {
		res.fail(fmt.Sprintf("move: %s → %s not done within %v", m.From, m.To, cfg.moveTimeout))
		return
	}
	m.MiBPerS = float64(m.MiB) / m.Seconds
	// The load's schedule began as the move was asked.
	m.LoadWithin = m.Seconds >= cfg.loadDuration.Seconds()
	if !m.LoadWithin {
		res.fail(fmt.Sprintf("move: done after %.1f s, before the load's %v ended: shorten --load-duration so its latencies are the move's", m.Seconds, cfg.loadDuration))
	}
}

func httpPost(ctx context.Context, url, body string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	return doRequest(req)
}
