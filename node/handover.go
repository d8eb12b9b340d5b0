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
		answer, err := postHandOver(ctx, node, httpapi.PlannedMoves{HoldMS: hold.Milliseconds(), Partitions: plannedMoves(planned)})
		held := 0
		for _, p := range answer.Partitions {
			if p.Drained {
				held++
			}
		}
		return held, err
	}
}

// tellMovesNotStored tells a node that the moves of planned were not
// stored, so its holds end now (cluster.Controller.MovesNotStored).
func tellMovesNotStored(ctx context.Context, node cluster.NodeInfo, planned []cluster.PlannedMove) error {
	_, err := postHandOver(ctx, node, httpapi.PlannedMoves{NotStored: true, Partitions: plannedMoves(planned)})
	return err
}

func plannedMoves(planned []cluster.PlannedMove) []httpapi.PlannedMove {
	out := make([]httpapi.PlannedMove, len(planned))
	for i, p := range planned {
		out[i] = httpapi.PlannedMove{Topic: p.Ref.Topic, Partition: p.Ref.Partition, Epoch: p.Epoch}
	}
	return out
}

// postHandOver makes a POST /partition/handover to node and reads its
// answer.
func postHandOver(ctx context.Context, node cluster.NodeInfo, q httpapi.PlannedMoves) (httpapi.PlannedMoves, error) {
	var answer httpapi.PlannedMoves
	body, err := json.Marshal(q)
	if err != nil {
		return answer, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+node.HTTPAddress+"/partition/handover", bytes.NewReader(body))
	if err != nil {
		return answer, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answer, fmt.Errorf("node %s: %s", node.ID, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return answer, fmt.Errorf("node %s: %w", node.ID, err)
	}
	return answer, nil
}
