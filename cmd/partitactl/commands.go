package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"
)

func runNodes(c *cli, args []string) error {
	fs := c.flagSet("nodes", "")
	_, cl, err := c.start(fs, args, 0)
	if err != nil {
		return err
	}
	return c.showNodes(cl)
}

func runTopic(c *cli, args []string) error {
	fs := c.flagSet("topic", "TOPIC")
	pos, cl, err := c.start(fs, args, 1)
	if err != nil {
		return err
	}
	info, err := cl.topic(context.Background(), pos[0])
	if err != nil {
		return err
	}
	return topicTable(c.out, info.Partitions)
}

func runCreate(c *cli, args []string) error {
	fs := c.flagSet("create", "TOPIC --partitions N --replicas R [--ordered]")
	partitions := fs.Int("partitions", 0, "partitions (0: the node's --default-partitions)")
	replicas := fs.Int("replicas", 0, "replicas of each partition (0: the node's --default-replicas)")
	ordered := fs.Bool("ordered", false, "an ordered topic: each partition delivers in order")
	pos, cl, err := c.start(fs, args, 1)
	if err != nil {
		return err
	}
	if err := cl.createTopic(context.Background(), pos[0], *partitions, *replicas, *ordered); err != nil {
		return err
	}
	return c.showTopic(cl, pos[0])
}

func runExpand(c *cli, args []string) error {
	fs := c.flagSet("expand", "TOPIC N")
	topic, n, cl, err := c.startNumbered(fs, args, "N")
	if err != nil {
		return err
	}
	if err := cl.expand(context.Background(), topic, n); err != nil {
		return err
	}
	return c.showTopic(cl, topic)
}

func runMoveLeader(c *cli, args []string) error {
	fs := c.flagSet("move-leader", "TOPIC PARTITION [--to NODE]")
	to := fs.String("to", "", "the ISR member to lead (default: the controller picks the preferred replica, or the member leading fewest)")
	topic, p, cl, err := c.startNumbered(fs, args, "PARTITION")
	if err != nil {
		return err
	}
	m, err := cl.moveLeader(context.Background(), topic, p, *to)
	if err != nil {
		return err
	}
	return table(c.out, []string{"TOPIC", "PARTITION", "LEADER", "EPOCH"},
		[][]string{{m.Topic, strconv.Itoa(int(m.Partition)), m.Leader, strconv.FormatInt(m.Epoch, 10)}})
}

// waitFlags are the flags of the commands that follow what they asked.
type waitFlags struct {
	noWait   bool
	timeout  time.Duration
	interval time.Duration
}

func addWaitFlags(fs *flag.FlagSet) *waitFlags {
	w := &waitFlags{}
	fs.BoolVar(&w.noWait, "no-wait", false, "return once the cluster accepted the request")
	fs.DurationVar(&w.timeout, "timeout", time.Hour, "longest wait for the operation to end (exit status 3 then; the operation goes on)")
	fs.DurationVar(&w.interval, "interval", time.Second, "time between readings of the progress")
	return w
}

func (c *cli) follower(w *waitFlags, title string) follower {
	return follower{out: c.out, tty: c.tty, interval: w.interval, quiet: 10 * time.Second, title: title}
}

func runMove(c *cli, args []string) error {
	fs := c.flagSet("move", "TOPIC PARTITION --from NODE --to NODE")
	from := fs.String("from", "", "node ID (--node-id) of the replica to move")
	to := fs.String("to", "", "node ID to move it to")
	w := addWaitFlags(fs)
	topic, p, cl, err := c.startNumbered(fs, args, "PARTITION")
	if err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return usageError{"move needs --from and --to"}
	}
	if err := cl.moveReplica(context.Background(), topic, p, *from, *to); err != nil {
		return err
	}
	if w.noWait {
		fmt.Fprintf(c.out, "move of %s/%d from %s to %s accepted\n", topic, p, *from, *to)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	title := fmt.Sprintf("%s/%d %s->%s", topic, p, *from, *to)
	err = c.follower(w, title).run(ctx, func(ctx context.Context) (reading, bool, error) {
		return moveReading(ctx, cl, topic, p, *from, *to)
	})
	if err != nil {
		return err
	}
	return c.showTopic(cl, topic)
}

// moveReading reads how much of a move is done, its copy and its steps in
// one unit, so the bar and the ETA run through the whole move: while its
// target catches up, by the bytes it holds of its leader's log.
func moveReading(ctx context.Context, cl *client, topic string, p int, from, to string) (reading, bool, error) {
	st, ok, err := cl.partition(ctx, topic, p)
	if err != nil {
		return reading{}, false, err
	}
	if !ok {
		return reading{}, false, fmt.Errorf("%s/%d is gone", topic, p)
	}
	phase, _ := moveStep(st, from, to)
	r := reading{at: time.Now(), total: 1, unit: unitMove, phase: phase}
	switch phase {
	case phaseRollBack:
		return r, false, errRolledBack
	case phaseAdding:
		if nodes, err := cl.nodesList(ctx); err == nil {
			r.copied, r.copyTotal = catchUpBytes(ctx, cl, nodes, topic, p, st.Leader, to)
		}
	}
	r.done = moveDone(phase, r.copied, r.copyTotal)
	return r, phase == phaseDone, nil
}

// catchUpBytes is the log end of a catching-up replica and of its leader,
// read from their /metrics; a copyTotal of 0 when the leader's cannot be
// read or its log is empty.
func catchUpBytes(ctx context.Context, cl *client, nodes []nodeEntry, topic string, p int, leader, target string) (copied, copyTotal int64) {
	addr := map[string]string{}
	for _, n := range nodes {
		addr[n.ID] = n.httpAddress()
	}
	if addr[leader] == "" || addr[target] == "" {
		return 0, 0
	}
	total, ok := cl.logEnd(ctx, addr[leader], topic, p)
	if !ok || total == 0 {
		return 0, 0
	}
	done, ok := cl.logEnd(ctx, addr[target], topic, p)
	if !ok {
		done = 0 // the target has not opened the partition yet
	}
	return min(done, total), total
}

// drainMoves is what is done of each move under way off node: the
// partitions of every topic moving a replica out of it.
func drainMoves(ctx context.Context, cl *client, nodes []nodeEntry, node string) ([]float64, error) {
	topics, err := cl.topics(ctx)
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, name := range topics {
		info, err := cl.topic(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, st := range info.Partitions {
			if !slices.Contains(st.MovingOut, node) || len(st.MovingIn) == 0 {
				continue
			}
			to := st.MovingIn[0]
			phase, _ := moveStep(st, node, to)
			var copied, copyTotal int64
			if phase == phaseAdding {
				copied, copyTotal = catchUpBytes(ctx, cl, nodes, name, st.Partition, st.Leader, to)
			}
			out = append(out, moveDone(phase, copied, copyTotal))
		}
	}
	return out, nil
}

func runReplicas(c *cli, args []string) error {
	fs := c.flagSet("replicas", "TOPIC R")
	w := addWaitFlags(fs)
	topic, r, cl, err := c.startNumbered(fs, args, "R")
	if err != nil {
		return err
	}
	if err := cl.setReplicas(context.Background(), topic, r); err != nil {
		return err
	}
	if w.noWait {
		fmt.Fprintf(c.out, "%s to %d replicas accepted\n", topic, r)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	err = c.follower(w, fmt.Sprintf("%s to %d replicas", topic, r)).run(ctx, func(ctx context.Context) (reading, bool, error) {
		info, err := cl.topic(ctx, topic)
		if err != nil {
			return reading{}, false, err
		}
		rd := replicasReading(time.Now(), info.Partitions, r)
		return rd, rd.done == rd.total, nil
	})
	if err != nil {
		return err
	}
	return c.showTopic(cl, topic)
}

func runDrain(c *cli, args []string) error {
	fs := c.flagSet("drain", "NODE")
	w := addWaitFlags(fs)
	pos, cl, err := c.start(fs, args, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	if err := cl.drain(context.Background(), id); err != nil {
		return err
	}
	if w.noWait {
		fmt.Fprintf(c.out, "drain of %s accepted\n", id)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	held := -1
	// The node's replica count and the moves under way come from two
	// requests: a move that ends between them shows in neither, and would
	// read as undone. A drain only moves replicas off, so what it has done
	// never shrinks.
	var drained float64
	err = c.follower(w, "drain "+id).run(ctx, func(ctx context.Context) (reading, bool, error) {
		nodes, err := cl.nodesList(ctx)
		if err != nil {
			return reading{}, false, err
		}
		for _, n := range nodes {
			if n.ID == id {
				held = max(held, n.Replicas)
				underWay, err := drainMoves(ctx, cl, nodes, id)
				if err != nil {
					return reading{}, false, err
				}
				r := drainReading(time.Now(), n, held, underWay)
				r.done = max(r.done, drained)
				drained = r.done
				return r, n.Removable, nil
			}
		}
		return reading{}, false, fmt.Errorf("%s is not a live node: its replicas move off it, but /nodes cannot show when", id)
	})
	if err != nil {
		return err
	}
	return c.showNodes(cl)
}

// showNodes prints the nodes.
func (c *cli) showNodes(cl *client) error {
	nodes, err := cl.nodesList(context.Background())
	if err != nil {
		return err
	}
	return nodesTable(c.out, nodes)
}

// showTopic prints a topic's partitions after a change.
func (c *cli) showTopic(cl *client, topic string) error {
	info, err := cl.topic(context.Background(), topic)
	if err != nil {
		return err
	}
	return topicTable(c.out, info.Partitions)
}

func number(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usageError{fmt.Sprintf("%s must be a whole number, not %q", what, s)}
	}
	return n, nil
}

// start reads a command's arguments and makes the client that asks the
// nodes.
func (c *cli) start(fs *flag.FlagSet, args []string, want int) ([]string, *client, error) {
	pos, err := parse(fs, args, want)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.client()
	return pos, cl, err
}

// startNumbered is start for a command of a topic and a number.
func (c *cli) startNumbered(fs *flag.FlagSet, args []string, what string) (string, int, *client, error) {
	pos, err := parse(fs, args, 2)
	if err != nil {
		return "", 0, nil, err
	}
	n, err := number(pos[1], what)
	if err != nil {
		return "", 0, nil, err
	}
	cl, err := c.client()
	return pos[0], n, cl, err
}
