package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// partition is one partition and the node leading it (0: none known).
type partition struct {
	topic  string
	p      int
	leader int
}

func topicName(i int) string { return fmt.Sprintf("scale_%05d", i) }

// topic is one created topic and its partition count (a JetStream
// stream: one).
type topic struct {
	name       string
	partitions int
}

// createTopics creates topics of cfg.topicPartitions partitions until
// target partitions exist, the last with what is left over, so that N is
// the partitions that exist; cfg.createParallel requests at a time spread
// over the nodes. It returns the topics whose create answered OK.
func createTopics(ctx context.Context, c *cluster, cfg config, target int, res *runResult) []topic {
	n := (target + cfg.topicPartitions - 1) / cfg.topicPartitions
	return createAll(ctx, cfg, n, res, func(ctx context.Context, i int) (topic, error) {
		nd := c.nodes[i%len(c.nodes)]
		t := topic{name: topicName(i), partitions: min(cfg.topicPartitions, target-i*cfg.topicPartitions)}
		url := fmt.Sprintf("http://%s/topic/create?topic=%s&partition_num=%d&replicator=%d", nd.http, t.name, t.partitions, cfg.replicas)
		_, err := httpDo(ctx, "POST", url, 60*time.Second)
		return t, err
	})
}

// createAll calls create for 0 … n-1, cfg.createParallel at a time, until
// cfg.createTimeout has passed, and fills res.Create. Failed creations are
// counted, not retried. It returns the topics created, by name.
func createAll(ctx context.Context, cfg config, n int, res *runResult, create func(ctx context.Context, i int) (topic, error)) []topic {
	var (
		mu       sync.Mutex
		created  []topic
		next     atomic.Int64
		wg       sync.WaitGroup
		errCount atomic.Int64
	)
	start := time.Now()
	for range cfg.createParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n || time.Since(start) > cfg.createTimeout {
					return
				}
				t, err := create(ctx, i)
				if err != nil {
					if errCount.Add(1) == 1 {
						mu.Lock()
						res.Create.FirstError = err.Error()
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				created = append(created, t)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Create.Seconds = time.Since(start).Seconds()
	res.Create.Topics = n
	res.Create.Created = len(created)
	res.Create.Errors = int(errCount.Load())
	if next.Load() < int64(n) {
		res.Create.NotTried = n - int(min(next.Load(), int64(n)))
	}
	slices.SortFunc(created, func(a, b topic) int { return strings.Compare(a.name, b.name) })
	return created
}

type lookupDoc struct {
	Partitions map[string]struct {
		TCPPort int `json:"tcp_port"`
	} `json:"partitions"`
}

// leaders is who leads each partition of topics (of a JetStream cluster:
// each stream), as far as the cluster knows; 0 where it names none.
func (c *cluster) leaders(ctx context.Context, topics []topic) ([]partition, error) {
	if c.system == sysNATS {
		return streamLeaders(ctx, c, topics)
	}
	return partitionLeaders(ctx, c, c.nodes[0], topics)
}

// partitionLeaders asks the given node's /lookup (the leaders as recorded
// in etcd) who leads each partition of topics. A partition it could not
// learn the leader of within two minutes in all has leader 0.
func partitionLeaders(ctx context.Context, c *cluster, via *node, topics []topic) ([]partition, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	byPort := map[int]int{}
	for _, n := range c.nodes {
		_, port, _ := net.SplitHostPort(n.tcp)
		p, _ := strconv.Atoi(port)
		byPort[p] = n.idx
	}
	var out []partition
	first := make([]int, len(topics)) // each topic's first partition in out
	for i, t := range topics {
		first[i] = len(out)
		for p := range t.partitions {
			out = append(out, partition{topic: t.name, p: p})
		}
	}
	var (
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(topics) {
					return
				}
				body, err := httpGet(ctx, "http://"+via.http+"/lookup?topic="+topics[i].name, 10*time.Second)
				var doc lookupDoc
				if err == nil {
					err = json.Unmarshal(body, &doc)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				for p := range topics[i].partitions {
					if e, ok := doc.Partitions[strconv.Itoa(p)]; ok {
						out[first[i]+p].leader = byPort[e.TCPPort]
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return out, firstErr
}

// waitLeaders polls /lookup until every partition of topics has a leader,
// or limit passes; it returns the last view.
func waitLeaders(ctx context.Context, c *cluster, topics []topic, limit time.Duration) ([]partition, bool) {
	deadline := time.Now().Add(limit)
	for {
		parts, _ := c.leaders(ctx, topics)
		led := 0
		for _, p := range parts {
			if p.leader != 0 {
				led++
			}
		}
		if led == len(parts) {
			return parts, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil || len(c.died()) > 0 {
			return parts, false
		}
		time.Sleep(time.Second)
	}
}

// measureIdle samples each node's CPU over window, then RSS, fds and
// goroutines. Nothing else talks to the nodes during the window.
func measureIdle(ctx context.Context, c *cluster, window time.Duration, res *runResult) {
	before := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		before[i], _ = cpuTicks(n.pid())
	}
	b0, t0 := machineTicks()
	start := time.Now()
	select {
	case <-ctx.Done():
		return
	case <-time.After(window):
	}
	secs := time.Since(start).Seconds()
	b1, t1 := machineTicks()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		res.LoadAvg = strings.Join(f[:min(3, len(f))], " ")
	}
	if t1 > t0 {
		res.MachineBusyPct = float64(b1-b0) / float64(t1-t0) * 100
	}
	for i, n := range c.nodes {
		f := &res.Nodes[i]
		if !n.alive() {
			f.Error = "not running"
			continue
		}
		after, err := cpuTicks(n.pid())
		if err != nil {
			f.Error = err.Error()
			continue
		}
		f.IdleCPUPct = float64(after-before[i]) / clockTicks / secs * 100
		f.RSSMiB, _ = rssMiB(n.pid())
		f.FDs, _ = fdCount(n.pid())
	}
	// Read last: the profile endpoint itself costs CPU.
	for i, n := range c.nodes {
		if g, err := goroutines(ctx, n); err == nil {
			res.Nodes[i].Goroutines = g
		} else if res.Nodes[i].Error == "" {
			res.Nodes[i].Error = "goroutines: " + err.Error()
		}
	}
}
