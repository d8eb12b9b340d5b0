package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// table writes rows under a header, columns aligned by spaces.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func nodesTable(w io.Writer, nodes []nodeEntry) error {
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		rows = append(rows, []string{n.ID, n.tcpAddress(), orDash(n.Zone), strconv.Itoa(n.Replicas),
			strconv.Itoa(n.Leading), yesNo(n.Draining), yesNo(n.Removable), yesNo(n.Leaving)})
	}
	return table(w, []string{"ID", "TCP", "ZONE", "REPLICAS", "LEADING", "DRAINING", "REMOVABLE", "LEAVING"}, rows)
}

func topicTable(w io.Writer, parts []partitionState) error {
	rows := make([][]string, 0, len(parts))
	for _, st := range parts {
		rows = append(rows, []string{strconv.Itoa(st.Partition), orDash(st.Leader), orDash(st.Preferred),
			strconv.FormatInt(st.Epoch, 10), list(st.ISR), list(st.Catchup), moving(st)})
	}
	return table(w, []string{"PARTITION", "LEADER", "PREFERRED", "EPOCH", "ISR", "CATCHING UP", "MOVE"}, rows)
}

// moving shows a move under way as the nodes it adds and removes.
func moving(st partitionState) string {
	var parts []string
	for _, n := range st.MovingIn {
		parts = append(parts, "+"+n)
	}
	for _, n := range st.MovingOut {
		parts = append(parts, "-"+n)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
