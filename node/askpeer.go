package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/partitamq/partita/cluster"
)

// statusError is a peer's answer other than 200 OK.
type statusError struct {
	node   string
	status string
	code   int
}

func (e *statusError) Error() string { return fmt.Sprintf("node %s: %s", e.node, e.status) }

// askPeer makes a node-to-node request of node's HTTP API: a POST of q as
// JSON, or a GET when q is nil, whose JSON answer it decodes into answer.
// An answer other than 200 OK is a *statusError.
func askPeer(ctx context.Context, node cluster.NodeInfo, path string, q, answer any) error {
	method, ctype := http.MethodGet, ""
	var body io.Reader
	if q != nil {
		b, err := json.Marshal(q)
		if err != nil {
			return err
		}
		method, ctype, body = http.MethodPost, "application/json", bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+node.HTTPAddress+path, body)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{node: node.ID, status: resp.Status, code: resp.StatusCode}
	}
	if err := json.NewDecoder(resp.Body).Decode(answer); err != nil {
		return fmt.Errorf("node %s: %w", node.ID, err)
	}
	return nil
}
