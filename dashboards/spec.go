// Package dashboards holds Partita's Grafana dashboards as data: spec.go
// says what every panel shows, build.go turns that into Grafana JSON with
// the Grafana foundation SDK, and the tests check the committed JSON is
// current, parses strictly, and queries only metrics a node exports.
package dashboards

import "strings"

// Board is one dashboard.
type Board struct {
	File, UID, Title, Description string
	Vars                          []string // template variables: node, topic, channel
	Panels                        []Panel
}

// Panel is one panel; Stat panels are small single numbers, the others time
// series.
type Panel struct {
	Title, Description, Unit string
	Stat                     bool
	Queries                  []Query
}

// Query is one PromQL target. $node, $topic and $channel are the template
// variables (regexes, ".*" for All); $__rate_interval is Grafana's.
type Query struct{ Expr, Legend string }

// Selectors used by many queries.
const (
	selNode  = `node=~"$node"`
	selTopic = `node=~"$node", topic=~"$topic"`
	selChan  = `node=~"$node", topic=~"$topic", channel=~"$channel"`
	// onLeader keeps a per-partition series only from the partition's
	// leader: followers report the same partitions and channels.
	onLeader = ` * on (node, topic, partition) group_left () partita_partition_is_leader`
)

func q(expr, legend string) Query { return Query{Expr: expr, Legend: legend} }

func p99(metric, by, sel string) string {
	return `histogram_quantile(0.99, sum by (le, ` + by + `) (rate(` + metric + `_bucket{` + sel + `}[$__rate_interval])))`
}

func p50(metric, by, sel string) string {
	return `histogram_quantile(0.5, sum by (le, ` + by + `) (rate(` + metric + `_bucket{` + sel + `}[$__rate_interval])))`
}

// Boards are every dashboard Partita ships.
var Boards = []Board{
	{
		File: "partita-overview.json", UID: "partita-overview", Title: "Partita / Cluster overview",
		Description: "The cluster at a glance: nodes, controller, partitions needing attention, throughput, latency and backlog.",
		Vars:        []string{"node"},
		Panels: []Panel{
			{Title: "Live nodes", Stat: true, Unit: "short",
				Description: "Nodes registered in the cluster's metadata (the highest count any scraped node reads).",
				Queries:     []Query{q(`max(partita_cluster_live_nodes)`, "live nodes")}},
			{Title: "Partitions without a leader", Stat: true, Unit: "short",
				Description: "Partitions whose leader is unset or not a live node. Non-zero during a failover; persistent values mean no ISR member is alive.",
				Queries:     []Query{q(`max(partita_cluster_partitions_without_leader)`, "without leader")}},
			{Title: "Under-replicated partitions", Stat: true, Unit: "short",
				Description: "Partitions whose ISR is smaller than their configured replica count, from the cluster's metadata.",
				Queries:     []Query{q(`max(partita_cluster_under_replicated_partitions)`, "under-replicated")}},
			{Title: "Write-disabled partitions", Stat: true, Unit: "short",
				Description: "Partitions whose leader has disabled writes (it failed a write it could not roll forward).",
				Queries:     []Query{q(`sum(partita_partition_write_disabled{`+selNode+`})`, "write-disabled")}},
			{Title: "Controller", Unit: "bool_yes_no",
				Description: "Which node is the elected controller (1) — the one that moves partition leadership off lost nodes.",
				Queries:     []Query{q(`partita_controller{`+selNode+`}`, "{{node}}")}},
			{Title: "Messages published per second", Unit: "ops",
				Description: "Messages committed per second by each topic's partition leaders (messages, not PUB commands).",
				Queries:     []Query{q(`sum by (topic) (rate(partita_publish_messages_total{`+selNode+`}[$__rate_interval])`+onLeader+`)`, "{{topic}}")}},
			{Title: "Bytes published per second", Unit: "Bps",
				Description: "Encoded message bytes committed per second by each topic's partition leaders.",
				Queries:     []Query{q(`sum by (topic) (rate(partita_publish_bytes_total{`+selNode+`}[$__rate_interval])`+onLeader+`)`, "{{topic}}")}},
			{Title: "Publish latency", Unit: "s",
				Description: "Time from a publish reaching the leader to its answer, 50th and 99th percentile over all topics.",
				Queries: []Query{
					q(p50("partita_publish_latency_seconds", "node", selNode), "p50 {{node}}"),
					q(p99("partita_publish_latency_seconds", "node", selNode), "p99 {{node}}"),
				}},
			{Title: "Publishes taken and refused", Unit: "ops",
				Description: "Messages of publishes each node took, and those it refused at once with E_PUB_TOO_MUCH_WAITING because it had its admission limit pending: refusals mean the cluster is past what it can write and pushes back.",
				Queries: []Query{
					q(`rate(partita_publish_admitted_messages_total{`+selNode+`}[$__rate_interval])`, "taken {{node}}"),
					q(`rate(partita_publish_refused_messages_total{`+selNode+`}[$__rate_interval])`, "refused {{node}}"),
				}},
			{Title: "Publish admission", Unit: "short",
				Description: "Messages each node has taken and not answered, against its admission limit, which shrinks while a queue stands (even the quickest answer over an interval of --pub-latency-target later than it) and grows back to --max-node-pub-waiting.",
				Queries: []Query{
					q(`partita_publish_admission_pending_messages{`+selNode+`}`, "pending {{node}}"),
					q(`partita_publish_admission_limit_messages{`+selNode+`}`, "limit {{node}}"),
				}},
			{Title: "Publishes waiting for a leader", Unit: "short",
				Description: "Publishes and forwards each node holds during an election: those waiting for their partition's leader to be known and told it leads, and forwards waiting for one of the node's 64 connections to that leader. Both rise through a failover and fall to zero once the new leaders take writes; each waits at most --forward-timeout.",
				Queries: []Query{
					q(`partita_forwards_waiting_for_leader{`+selNode+`}`, "for a leader {{node}}"),
					q(`partita_forwards_waiting_for_connection{`+selNode+`}`, "for a connection {{node}}"),
				}},
			{Title: "Liveness under load", Unit: "short",
				Description: "What load must never cost: lease renewals that came later than 1.5 s after the one before (the lease is 2 s by default), registrations lost, peers evicted and ISR shrinks over 5 minutes. All zero on a cluster that bends under overload rather than breaks.",
				Queries: []Query{
					q(`sum by (node) (increase(partita_node_lease_keepalive_gap_seconds_count{`+selNode+`}[5m])) - sum by (node) (increase(partita_node_lease_keepalive_gap_seconds_bucket{`+selNode+`, le="1.5"}[5m]))`, "late renewals {{node}}"),
					q(`increase(partita_node_registrations_lost_total{`+selNode+`}[5m])`, "registrations lost {{node}}"),
					q(`increase(partita_peer_evictions_total{`+selNode+`}[5m])`, "evictions by {{node}}"),
					q(`sum by (node) (increase(partita_isr_shrinks_total{`+selNode+`}[5m]))`, "ISR shrinks by {{node}}"),
				}},
			{Title: "Channel backlog", Unit: "short",
				Description: "Messages not yet finished, summed over each topic's channels, as their partitions' leaders count them.",
				Queries:     []Query{q(`sum by (topic) (partita_channel_lag_messages{`+selNode+`}`+onLeader+`)`, "{{topic}}")}},
			{Title: "Client connections", Unit: "short",
				Description: "Open NSQ TCP connections per node.",
				Queries:     []Query{q(`partita_client_connections{`+selNode+`}`, "{{node}}")}},
		},
	},
	{
		File: "partita-topics.json", UID: "partita-topics", Title: "Partita / Topics and partitions",
		Description: "Per topic and partition: throughput, latency, leadership, log size and disk use.",
		Vars:        []string{"node", "topic"},
		Panels: []Panel{
			{Title: "Messages per second by partition", Unit: "ops",
				Description: "Messages committed per second by each partition's leader.",
				Queries:     []Query{q(`sum by (topic, partition) (rate(partita_publish_messages_total{`+selTopic+`}[$__rate_interval])`+onLeader+`)`, "{{topic}}/{{partition}}")}},
			{Title: "Bytes per second by partition", Unit: "Bps",
				Description: "Encoded bytes committed per second by each partition's leader.",
				Queries:     []Query{q(`sum by (topic, partition) (rate(partita_publish_bytes_total{`+selTopic+`}[$__rate_interval])`+onLeader+`)`, "{{topic}}/{{partition}}")}},
			{Title: "Publish latency p99 by topic", Unit: "s",
				Description: "99th percentile of the time from a publish reaching the leader to its answer.",
				Queries:     []Query{q(p99("partita_publish_latency_seconds", "topic", selTopic), "{{topic}}")}},
			{Title: "Commit latency p99 by partition", Unit: "s",
				Description: "99th percentile of the time from a record's local write on the leader to its commit, once every ISR follower acknowledged it.",
				Queries:     []Query{q(p99("partita_commit_latency_seconds", "topic, partition", selTopic), "{{topic}}/{{partition}}")}},
			{Title: "Partition leaders", Unit: "bool_yes_no",
				Description: "1 on the node that leads each partition.",
				Queries:     []Query{q(`partita_partition_is_leader{`+selTopic+`} == 1`, "{{topic}}/{{partition}} on {{node}}")}},
			{Title: "Committed log size", Unit: "bytes",
				Description: "Committed end offset of each partition's log (bytes ever written, before retention).",
				Queries:     []Query{q(`max by (topic, partition) (partita_partition_log_end_bytes{`+selTopic+`})`, "{{topic}}/{{partition}}")}},
			{Title: "Disk use by partition and node", Unit: "bytes",
				Description: "Bytes each replica's files (segments, commit log, channel state) take on its node's disk.",
				Queries:     []Query{q(`partita_partition_disk_bytes{`+selTopic+`}`, "{{topic}}/{{partition}} on {{node}}")}},
			{Title: "Writes in flight and publishes waiting", Unit: "short",
				Description: "Records each partition's leader wrote locally and has not committed yet (at most the write window), and published messages queued behind them.",
				Queries: []Query{
					q(`sum by (topic, partition) (partita_partition_writes_in_flight{`+selTopic+`})`, "in flight {{topic}}/{{partition}}"),
					q(`sum by (topic, partition) (partita_partition_publish_waiting_messages{`+selTopic+`})`, "waiting {{topic}}/{{partition}}"),
				}},
			{Title: "Messages waiting for a first channel", Unit: "short",
				Description: "Messages published to a partition that has no channel yet; the first channel receives them.",
				Queries:     []Query{q(`max by (topic, partition) (partita_topic_depth{`+selTopic+`})`, "{{topic}}/{{partition}}")}},
			{Title: "Dedupe window: IDs remembered and duplicates answered", Unit: "short",
				Description: "Message IDs each partition's leader remembers in the topic's dedupe window, and published messages per second answered as duplicates without a write (0 on topics without a window).",
				Queries: []Query{
					q(`sum by (topic, partition) (partita_topic_dedupe_entries{`+selTopic+`})`, "IDs {{topic}}/{{partition}}"),
					q(`sum by (topic, partition) (rate(partita_topic_dedupe_hits_total{`+selTopic+`}[5m]))`, "duplicates/s {{topic}}/{{partition}}"),
				}},
		},
	},
	{
		File: "partita-replication.json", UID: "partita-replication", Title: "Partita / Replication health",
		Description: "ISR membership, under-replication, elections, replica latency and catch-up.",
		Vars:        []string{"node", "topic"},
		Panels: []Panel{
			{Title: "ISR size and configured replicas", Unit: "short",
				Description: "In-sync replicas each partition's leader counts, against the partition's configured replica count.",
				Queries: []Query{
					q(`sum by (topic, partition) (partita_partition_isr_size{`+selTopic+`}`+onLeader+`)`, "ISR {{topic}}/{{partition}}"),
					q(`max by (topic, partition) (partita_partition_replicas{`+selTopic+`})`, "replicas {{topic}}/{{partition}}"),
				}},
			{Title: "Under-replicated partitions by leader", Unit: "short",
				Description: "Partitions each node leads whose ISR is smaller than their replica count.",
				Queries:     []Query{q(`sum by (node) (partita_partition_under_replicated{`+selTopic+`})`, "{{node}}")}},
			{Title: "Partitions without a leader", Unit: "short",
				Description: "Partitions whose leader is unset or not a live node, from the cluster's metadata.",
				Queries:     []Query{q(`max(partita_cluster_partitions_without_leader)`, "without leader")}},
			{Title: "Write-disabled partitions", Unit: "short",
				Description: "Partitions whose leader has disabled writes.",
				Queries:     []Query{q(`sum by (topic, partition) (partita_partition_write_disabled{`+selTopic+`})`, "{{topic}}/{{partition}}")}},
			{Title: "Leader elections (5m)", Unit: "short",
				Description: "Times a node took a partition's leadership in the last 5 minutes (startup, failover or handover).",
				Queries:     []Query{q(`sum by (topic, partition) (increase(partita_leader_elections_total{`+selTopic+`}[5m]))`, "{{topic}}/{{partition}}")}},
			{Title: "Leader moves (5m)", Unit: "short",
				Description: "Partition leaderships the controller handed from a live leader to another ISR member in the last 5 minutes, by reason: asked (/topic/partition/move), balance (back to the preferred replica), drain (off a node being emptied), leaving (off a node that is stopping); the old leaders it had drain first, by outcome (not_drained: that move failed the writes in flight); and the publishes sent on to a new leader, never written on the old one.",
				Queries: []Query{
					q(`sum by (reason) (increase(partita_controller_leader_moves_total[5m]))`, "{{reason}}"),
					q(`sum by (outcome) (increase(partita_controller_leader_move_drains_total[5m]))`, "drains {{outcome}}"),
					q(`sum(increase(partita_publishes_sent_on_total[5m]))`, "publishes sent on"),
				}},
			{Title: "Partitions led off their preferred replica", Unit: "short",
				Description: "Partitions with a live leader other than their preferred replica (a failover moved it). The leader balance moves them back once the preferred replica is in the ISR; a value that stays up means that replica is not in sync or the balance is off.",
				Queries:     []Query{q(`max(partita_cluster_partitions_off_preferred_leader)`, "off preferred")}},
			{Title: "ISR shrinks and expands (5m)", Unit: "short",
				Description: "Followers removed from and caught-up replicas added to each partition's ISR in the last 5 minutes.",
				Queries: []Query{
					q(`sum by (topic, partition) (increase(partita_isr_shrinks_total{`+selTopic+`}[5m]))`, "shrinks {{topic}}/{{partition}}"),
					q(`sum by (topic, partition) (increase(partita_isr_expands_total{`+selTopic+`}[5m]))`, "expands {{topic}}/{{partition}}"),
				}},
			{Title: "Replica ack latency p99 by follower", Unit: "s",
				Description: "99th percentile of the time from a record's local write on the leader to each follower's acknowledgement.",
				Queries:     []Query{q(p99("partita_replica_ack_latency_seconds", "follower", selTopic), "{{follower}}")}},
			{Title: "Commit latency p99", Unit: "s",
				Description: "99th percentile of the time from a record's local write on the leader to its commit, per leading node.",
				Queries:     []Query{q(p99("partita_commit_latency_seconds", "node", selTopic), "{{node}}")}},
			{Title: "Replicas catching up", Unit: "short",
				Description: "Replicas outside the ISR being caught up to rejoin it, per partition as its leader knows, and over the cluster's metadata.",
				Queries: []Query{
					q(`sum by (topic, partition) (partita_partition_catchup_replicas{`+selTopic+`}`+onLeader+`)`, "{{topic}}/{{partition}}"),
					q(`max(partita_cluster_catchup_replicas)`, "cluster"),
				}},
			{Title: "Records per replication frame", Unit: "short",
				Description: "Records a leader sends a follower per frame, by follower: 1 when idle, more under load, as records made while a frame waits for its answer leave together in the next.",
				Queries:     []Query{q(`sum by (follower) (rate(partita_replica_frame_records_total{node=~"$node"}[$__rate_interval])) / sum by (follower) (rate(partita_replica_frames_total{node=~"$node"}[$__rate_interval]))`, "{{follower}}")}},
			{Title: "Catch-up records sent per second", Unit: "ops",
				Description: "Committed records leaders re-send to followers that fell behind or were just added by a move, by follower, counted chunk by chunk as the push goes.",
				Queries:     []Query{q(`sum by (follower) (rate(partita_replica_catchup_records_total{`+selTopic+`}[$__rate_interval]))`, "{{follower}}")}},
			{Title: "Replica moves under way", Unit: "short",
				Description: "From the cluster's metadata: partitions with a replica move under way (a move, a replica-count change, a drain or the balance), the replicas those moves add, and the replicas catching up (added ones, repairs and restarted followers). The added replicas catch up, join the ISR, the replicas they replace leave, and each move then drops out of the counts.",
				Queries: []Query{
					q(`max(partita_cluster_moving_partitions)`, "partitions moving"),
					q(`max(partita_cluster_moving_replicas)`, "replicas being added"),
					q(`max(partita_cluster_catchup_replicas)`, "replicas catching up"),
				}},
			{Title: "Catch-up bytes per second against the rate limit", Unit: "Bps",
				Description: "Message bytes each leading node pushes to replicas catching up, over all its partitions, against its --catchup-rate-limit (no limit line when it is 0). A move or drain running at the limit takes the backlog's size over the limit; far below it, the replicas or the network are the bound.",
				Queries: []Query{
					q(`sum by (node) (rate(partita_replica_catchup_bytes_total{`+selNode+`}[$__rate_interval]))`, "sent by {{node}}"),
					q(`max by (node) (partita_catchup_rate_limit_bytes{`+selNode+`}) > 0`, "limit of {{node}}"),
				}},
			{Title: "Log end of the replicas of partitions catching up", Unit: "bytes",
				Description: "Committed log end of every replica of the partitions that had a replica catching up within the dashboard's time range (a move, a replica-count change, a drain, the balance, a repair): a new replica's line climbs to its leader's, and a replica that is removed ends.",
				Queries:     []Query{q(`max by (topic, partition, node) (partita_partition_log_end_bytes{`+selTopic+`}) and on (topic, partition) (max by (topic, partition) (max_over_time(partita_partition_catchup_replicas{`+selTopic+`}[$__range])) > 0)`, "{{topic}}/{{partition}} on {{node}}")}},
		},
	},
	{
		File: "partita-channels.json", UID: "partita-channels", Title: "Partita / Channels and consumers",
		Description: "Per channel: backlog, consumer lag, in-flight and deferred messages, requeues, timeouts, dead letters and consumers.",
		Vars:        []string{"node", "topic", "channel"},
		Panels: []Panel{
			{Title: "Depth", Unit: "short",
				Description: "Messages waiting for delivery on each channel, as the partitions' leaders count them.",
				Queries:     []Query{q(`sum by (topic, channel) (partita_channel_depth{`+selChan+`}`+onLeader+`)`, "{{topic}}/{{channel}}")}},
			{Title: "Consumer lag (messages)", Unit: "short",
				Description: "Messages committed and not yet finished on each channel.",
				Queries:     []Query{q(`sum by (topic, channel) (partita_channel_lag_messages{`+selChan+`}`+onLeader+`)`, "{{topic}}/{{channel}}")}},
			{Title: "Consumer lag (time)", Unit: "s",
				Description: "Age of the oldest message not yet finished on each channel; 0 when consumers are caught up.",
				Queries:     []Query{q(`max by (topic, channel) (partita_channel_lag_seconds{`+selChan+`}`+onLeader+`)`, "{{topic}}/{{channel}}")}},
			{Title: "End-to-end processing latency", Unit: "s",
				Description: "Estimated quantiles of the time from a message's publish to its FIN, over --e2e-processing-latency-window-time, the worst partition's; empty unless the nodes run with --e2e-processing-latency-percentile.",
				Queries:     []Query{q(`max by (topic, channel, percentile) (partita_channel_e2e_processing_latency_seconds{`+selChan+`}`+onLeader+`)`, "{{topic}}/{{channel}} p{{percentile}}")}},
			{Title: "In flight", Unit: "short",
				Description: "Messages delivered to consumers and not yet finished.",
				Queries:     []Query{q(`sum by (topic, channel) (partita_channel_in_flight{`+selChan+`})`, "{{topic}}/{{channel}}")}},
			{Title: "Deferred", Unit: "short",
				Description: "Messages held back by DPUB or by REQ with a delay.",
				Queries:     []Query{q(`sum by (topic, channel) (partita_channel_deferred{`+selChan+`})`, "{{topic}}/{{channel}}")}},
			{Title: "Messages into channels per second", Unit: "ops",
				Description: "Messages entering each channel per second.",
				Queries:     []Query{q(`sum by (topic, channel) (rate(partita_channel_messages_total{`+selChan+`}[$__rate_interval])`+onLeader+`)`, "{{topic}}/{{channel}}")}},
			{Title: "Requeues and timeouts per second", Unit: "ops",
				Description: "REQ commands accepted and in-flight messages that timed out, per second.",
				Queries: []Query{
					q(`sum by (topic, channel) (rate(partita_channel_requeues_total{`+selChan+`}[$__rate_interval]))`, "requeues {{topic}}/{{channel}}"),
					q(`sum by (topic, channel) (rate(partita_channel_timeouts_total{`+selChan+`}[$__rate_interval]))`, "timeouts {{topic}}/{{channel}}"),
				}},
			{Title: "Dead-lettered messages", Unit: "short",
				Description: "Messages past their channel's max_attempts moved to <topic>.dead over each interval; 0 on channels without max_attempts.",
				Queries:     []Query{q(`sum by (topic, channel) (increase(partita_channel_dead_lettered_total{`+selChan+`}[$__rate_interval]))`, "{{topic}}/{{channel}}")}},
			{Title: "Consumers", Unit: "short",
				Description: "Connections subscribed to each channel, over all nodes.",
				Queries:     []Query{q(`sum by (topic, channel) (partita_channel_consumers{`+selChan+`})`, "{{topic}}/{{channel}}")}},
		},
	},
	{
		File: "partita-node.json", UID: "partita-node", Title: "Partita / Node internals",
		Description: "Inside each node: the actor system, fsyncs, disk, memory, CPU and the Go runtime.",
		Vars:        []string{"node"},
		Panels: []Panel{
			{Title: "Actor mailbox messages", Unit: "short",
				Description: "Messages queued in the mailboxes of each kind of actor (partition, channel, replica) and not yet processed.",
				Queries:     []Query{q(`sum by (node, kind) (partita_actor_mailbox_messages{`+selNode+`})`, "{{node}} {{kind}}")}},
			{Title: "Actor messages processed per second", Unit: "ops",
				Description: "Messages each kind of actor processes per second.",
				Queries:     []Query{q(`sum by (node, kind) (rate(partita_actor_receive_duration_seconds_count{`+selNode+`}[$__rate_interval]))`, "{{node}} {{kind}}")}},
			{Title: "Actor processing time p99", Unit: "s",
				Description: "99th percentile of the time an actor of each kind takes to process one message.",
				Queries:     []Query{q(p99("partita_actor_receive_duration_seconds", "node, kind", selNode), "{{node}} {{kind}}")}},
			{Title: "Fsyncs per second", Unit: "ops",
				Description: "A partition's own fsyncs of its segment and commit log per second: at --sync-every 1, at a clean stop and after a failed syncfs (the node's syncfs covers the rest).",
				Queries:     []Query{q(`sum by (node) (rate(partita_fsync_duration_seconds_count{`+selNode+`}[$__rate_interval]))`, "{{node}}")}},
			{Title: "Fsync latency p99", Unit: "s",
				Description: "99th percentile of the time to fsync a partition's segment and commit log.",
				Queries:     []Query{q(p99("partita_fsync_duration_seconds", "node", selNode), "{{node}}")}},
			{Title: "Syncfs time p99", Unit: "s",
				Description: "99th percentile of the time the node's syncfs of its data directory takes: the write-back that covers every partition's commits, or with --journal the checkpoint that lets the journal start over. With writes spread over thousands of partitions each syncfs writes back a page per message and file, and appends wait while it runs.",
				Queries:     []Query{q(p99("partita_syncfs_duration_seconds", "node", selNode), "{{node}}")}},
			{Title: "Journal sync time p99", Unit: "s",
				Description: "99th percentile of the time the node's journal (--journal) takes to write out and fdatasync the records of every partition's writes: what covers the commits instead of a syncfs. Its checkpoints are syncfs calls, in the panel beside.",
				Queries:     []Query{q(p99("partita_journal_sync_duration_seconds", "node", selNode), "{{node}}")}},
			{Title: "Disk use", Unit: "bytes",
				Description: "Bytes all partitions' files take on each node's disk.",
				Queries:     []Query{q(`sum by (node) (partita_partition_disk_bytes{`+selNode+`})`, "{{node}}")}},
			{Title: "Resident memory", Unit: "bytes",
				Description: "Resident set size of the node process.",
				Queries:     []Query{q(`process_resident_memory_bytes{`+selNode+`}`, "{{node}}")}},
			{Title: "CPU", Unit: "percentunit",
				Description: "CPU time the node process uses per second (1 = one core).",
				Queries:     []Query{q(`rate(process_cpu_seconds_total{`+selNode+`}[$__rate_interval])`, "{{node}}")}},
			{Title: "Goroutines", Unit: "short",
				Description: "Goroutines in the node process.",
				Queries:     []Query{q(`go_goroutines{`+selNode+`}`, "{{node}}")}},
			{Title: "Open file descriptors", Unit: "short",
				Description: "File descriptors the node process holds (segments, sockets), against its limit.",
				Queries: []Query{
					q(`process_open_fds{`+selNode+`}`, "open {{node}}"),
					q(`process_max_fds{`+selNode+`}`, "limit {{node}}"),
				}},
		},
	},
}

// Expand replaces the template variables as Grafana does with "All"
// selected (".*"), $__rate_interval with 1m and $__range with 1h, for tools
// that run a panel's query outside Grafana.
func Expand(expr string) string {
	return strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$node", ".*", "$topic", ".*", "$channel", ".*").Replace(expr)
}
