package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// refusal is a node's answer other than 200: its status and the code or
// text it gave (nsqd's {"message": CODE}).
type refusal struct {
	Status  int
	Message string
	Node    string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("%s answered %d %s", r.Node, r.Status, r.Message)
}

// refusalText is the code of an nsqd error body, or the body itself.
func refusalText(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	return strings.TrimSpace(string(body))
}

// decode reads a node's JSON answer into v.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	return nil
}
