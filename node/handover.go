package node

import (
	"context"
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
	err := askPeer(ctx, node, "/partition/handover", q, &answer)
	return answer, err
}
