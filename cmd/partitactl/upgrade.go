package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// clusterStats is what /cluster/stats says of the cluster.
type clusterStats struct {
	Stable          bool     `json:"stable"`
	Upgrading       bool     `json:"upgrading"`
	UpgradeSince    int64    `json:"upgrade_since"`
	Controller      string   `json:"controller"`
	LiveNodes       int      `json:"live_nodes"`
	GoneNodes       []string `json:"gone_nodes"`
	Partitions      int      `json:"partitions"`
	Leaderless      int      `json:"leaderless_partitions"`
	UnderReplicated int      `json:"under_replicated_partitions"`
	WriteDisabled   int      `json:"write_disabled_partitions"`
	Moving          int      `json:"moving_partitions"`
}

func (c *client) clusterStats(ctx context.Context) (clusterStats, error) {
	var s clusterStats
	return s, c.get(ctx, "/cluster/stats", nil, &s)
}

// runCluster prints the cluster's health: what to check before restarting
// the next node of an upgrade.
func runCluster(c *cli, args []string) error {
	fs := c.flagSet("cluster", "")
	_, cl, err := c.start(fs, args, 0)
	if err != nil {
		return err
	}
	return c.showCluster(cl)
}

func (c *cli) showCluster(cl *client) error {
	s, err := cl.clusterStats(context.Background())
	if err != nil {
		return err
	}
	// An upgrade under way shows as the time it began.
	upgrade := "no"
	if s.Upgrading {
		upgrade = time.Unix(s.UpgradeSince, 0).UTC().Format(time.RFC3339)
	}
	return table(c.out, []string{"STABLE", "CONTROLLER", "UPGRADING", "NODES", "GONE", "PARTITIONS", "LEADERLESS", "UNDER-REPLICATED", "WRITE-DISABLED", "MOVING"},
		[][]string{{yesNo(s.Stable), orDash(s.Controller), upgrade, strconv.Itoa(s.LiveNodes), list(s.GoneNodes), strconv.Itoa(s.Partitions),
			strconv.Itoa(s.Leaderless), strconv.Itoa(s.UnderReplicated), strconv.Itoa(s.WriteDisabled), strconv.Itoa(s.Moving)}})
}

// runUpgrade begins or ends youzan's upgrade mode, then prints the
// cluster's health.
func runUpgrade(c *cli, args []string) error {
	fs := c.flagSet("upgrade", "begin|done")
	pos, cl, err := c.start(fs, args, 1)
	if err != nil {
		return err
	}
	var path string
	switch pos[0] {
	case "begin":
		path = "/cluster/upgrade/begin"
	case "done":
		path = "/cluster/upgrade/done"
	default:
		return usageError{fmt.Sprintf("upgrade takes begin or done, not %q", pos[0])}
	}
	if _, err := cl.post(context.Background(), path, nil); err != nil {
		return err
	}
	return c.showCluster(cl)
}
