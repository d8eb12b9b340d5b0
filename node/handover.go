package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/httpapi"
)

// askHandOver tells a node, through its HTTP API, that the leaderships of
// planned are about to move, and returns how many hold their writes with
// none in flight (cluster.Controller.HandOver). Each holds for hold at
// most, should the move not come.
func askHandOver(hold time.Duration) func(ctx context.Context, node cluster.NodeInfo, planned []cluster.PlannedMove) (int, error) {
	return func(ctx context.Context, node cluster.NodeInfo, planned []cluster.PlannedMove) (int, error) {
		q := httpapi.PlannedMoves{HoldMS: hold.Milliseconds(), Partitions: make([]httpapi.PlannedMove, len(planned))}
		for i, p := range planned {
			q.Partitions[i] = httpapi.PlannedMove{Topic: p.Ref.Topic, Partition: p.Ref.Partition, Epoch: p.Epoch}
		}
		body, err := json.Marshal(q)
		if err != nil {
			return 0, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+node.HTTPAddress+"/partition/handover", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("node %s: %s", node.ID, resp.Status)
		}
		var answer httpapi.PlannedMoves
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			return 0, fmt.Errorf("node %s: %w", node.ID, err)
		}
		held := 0
		for _, p := range answer.Partitions {
			if p.Drained {
				held++
			}
		}
		return held, nil
	}
}
