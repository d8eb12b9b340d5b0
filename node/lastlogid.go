package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/httpapi"
)

// askLastLogIDs asks a node's HTTP API, in one request, for its last
// committed LogID of each partition given; those it does not hold or could
// not answer for in time are absent. A node of an earlier version knows
// only the one-partition question, and is asked that for each.
func askLastLogIDs(ctx context.Context, node cluster.NodeInfo, parts []cluster.PartitionRef) (map[cluster.PartitionRef]int64, error) {
	q := httpapi.PartitionsLast{Partitions: make([]httpapi.PartitionLogID, len(parts))}
	for i, p := range parts {
		q.Partitions[i] = httpapi.PartitionLogID{Topic: p.Topic, Partition: p.Partition}
	}
	var answer httpapi.PartitionsLast
	err := askPeer(ctx, node, "/partition/last", q, &answer)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusMethodNotAllowed {
		return askEachLastLogID(ctx, node, parts), nil
	}
	if err != nil {
		return nil, err
	}
	ids := make(map[cluster.PartitionRef]int64, len(answer.Partitions))
	for _, p := range answer.Partitions {
		ids[cluster.PartitionRef{Topic: p.Topic, Partition: p.Partition}] = p.LastLogID
	}
	return ids, nil
}

// askEachParallelism bounds the one-partition questions in flight to a
// node of an earlier version.
const askEachParallelism = 16

// askEachLastLogID asks for each partition in its own request, some at
// once; a partition whose question fails is left out.
func askEachLastLogID(ctx context.Context, node cluster.NodeInfo, parts []cluster.PartitionRef) map[cluster.PartitionRef]int64 {
	ids := make(map[cluster.PartitionRef]int64, len(parts))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, askEachParallelism)
	for _, p := range parts {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if id, err := askLastLogID(ctx, node, p); err == nil {
				mu.Lock()
				ids[p] = id
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ids
}

// askLastLogID asks a node's HTTP API for its last committed LogID of one
// partition.
func askLastLogID(ctx context.Context, node cluster.NodeInfo, p cluster.PartitionRef) (int64, error) {
	var doc struct {
		LastLogID int64 `json:"last_log_id"`
	}
	err := askPeer(ctx, node, fmt.Sprintf("/partition/last?topic=%s&partition=%d", url.QueryEscape(p.Topic), p.Partition), nil, &doc)
	return doc.LastLogID, err
}
