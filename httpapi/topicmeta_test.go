package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

// settingsStats are the per-topic settings /stats shows for a partition.
type settingsStats struct {
	TopicPartition              string `json:"topic_partition"`
	IsMultiOrdered              bool   `json:"is_multi_ordered"`
	IsChannelAutoCreateDisabled bool   `json:"is_channel_auto_create_disabled"`
	SyncDisk                    int    `json:"syncdisk"`
	RetentionDays               int    `json:"retention_days"`
}

func topicSettings(t testing.TB, n *testnode.Node, topic string) []settingsStats {
	t.Helper()
	var doc struct {
		Topics []settingsStats `json:"topics"`
	}
	getJSON(t, n, "/stats?format=json&include_mem=false&topic="+topic, &doc)
	return doc.Topics
}

// waitSettings waits until every partition of topic on n shows want.
func waitSettings(t testing.TB, n *testnode.Node, topic string, partitions int, want settingsStats) {
	t.Helper()
	var got []settingsStats
	eventually(t, topic+"'s settings on every partition", func() bool {
		got = topicSettings(t, n, topic)
		if len(got) != partitions {
			return false
		}
		for _, st := range got {
			st.TopicPartition = ""
			if st != want {
				return false
			}
		}
		return true
	}, func() any { return got })
}

// lookupMeta is /lookup?metainfo=true's meta object, by key.
func lookupMeta(t testing.TB, n *testnode.Node, topic string) map[string]any {
	t.Helper()
	var doc struct {
		Meta map[string]any `json:"meta"`
	}
	getJSON(t, n, "/lookup?metainfo=true&topic="+topic, &doc)
	return doc.Meta
}

// youzan's /topic/create parameters are kept with the topic: /stats shows
// them per partition (youzan's is_multi_ordered and
// is_channel_auto_create_disabled, and the fsync count and retention the
// partition applies), /lookup's meta under youzan's keys. A topic that
// sets none applies the node's flags.
func TestTopicCreateTakesYouzanSettings(t *testing.T) {
	n := testnode.Start(t, "--sync-every", "100", "--retention-days", "9")
	expectV1(t, n, http.MethodPost, "/topic/create?topic=yz&partition_num=2&replicator=1&suggestload=0"+
		"&orderedmulti=true&syncdisk=3&retention=5&disable_channel_auto_create=true", "", http.StatusOK, "")
	waitSettings(t, n, "yz", 2, settingsStats{IsMultiOrdered: true, IsChannelAutoCreateDisabled: true, SyncDisk: 3, RetentionDays: 5})
	// Creating it again changes none of them.
	expectV1(t, n, http.MethodPost, "/topic/create?topic=yz&syncdisk=9&retention=1&disable_channel_auto_create=false", "", http.StatusOK, "")
	want := map[string]any{"partition_num": 2.0, "replica": 1.0, "ordered": true, "extend_support": false,
		"disable_channel_auto_create": true, "syncdisk": 3.0, "retention_days": 5.0}
	if got := lookupMeta(t, n, "yz"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("/lookup meta %v, want %v", got, want)
	}

	mustPost(t, n, "/topic/create?topic=plain", "", "")
	waitSettings(t, n, "plain", 1, settingsStats{SyncDisk: 100, RetentionDays: 9})
	want = map[string]any{"partition_num": 1.0, "replica": 1.0, "ordered": false, "extend_support": false,
		"disable_channel_auto_create": false, "syncdisk": 0.0, "retention_days": 0.0}
	if got := lookupMeta(t, n, "plain"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("/lookup meta %v, want %v", got, want)
	}

	// An ordered topic from youzan's tooling takes only SUB_ORDERED.
	c := dial(t, n, map[string]any{})
	c.send(nsq.Subscribe("yz", "c"))
	if typ, data := c.frame(); typ != nsq.FrameTypeError || !strings.HasPrefix(string(data), "E_SUB_ORDER_IS_MUST") {
		t.Fatalf("SUB to an orderedmulti topic: frame %d %q, want E_SUB_ORDER_IS_MUST", typ, data)
	}

	for _, tc := range []struct{ query, code string }{
		{"topic=bad&syncdisk=-1", "INVALID_ARG_TOPIC_SYNC_DISK"},
		{"topic=bad&syncdisk=often", "INVALID_ARG_TOPIC_SYNC_DISK"},
		{"topic=bad&retention=-2", "INVALID_ARG_TOPIC_RETENTION"},
		{"topic=bad&retention=week", "INVALID_ARG_TOPIC_RETENTION"},
	} {
		expectV1(t, n, http.MethodPost, "/topic/create?"+tc.query, "", http.StatusBadRequest, errBody(tc.code))
	}
	if got := topicSettings(t, n, "bad"); len(got) != 0 {
		t.Fatalf("a refused create made the topic: %+v", got)
	}
}

// youzan's /topic/meta/update changes the settings it names and keeps the
// others; the running partitions apply the change, and /lookup shows it.
// Values past youzan's limits, an unknown topic and more replicas than
// nodes are refused.
func TestTopicMetaUpdateChangesRunningPartitions(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=mu&partition_num=2&syncdisk=10", "", "")
	waitSettings(t, n, "mu", 2, settingsStats{SyncDisk: 10})

	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=mu&syncdisk=1&retention=2&disable_channel_auto_create=true", "", http.StatusOK, "")
	waitSettings(t, n, "mu", 2, settingsStats{SyncDisk: 1, RetentionDays: 2, IsChannelAutoCreateDisabled: true})
	meta := lookupMeta(t, n, "mu")
	if meta["syncdisk"] != 1.0 || meta["retention_days"] != 2.0 || meta["disable_channel_auto_create"] != true {
		t.Fatalf("/lookup meta after the update: %v", meta)
	}

	// Only what is named changes; replicator may restate the count.
	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=mu&disable_channel_auto_create=false&replicator=1", "", http.StatusOK, "")
	waitSettings(t, n, "mu", 2, settingsStats{SyncDisk: 1, RetentionDays: 2})
	// 0 goes back to the node's flags.
	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=mu&syncdisk=0&retention=0", "", http.StatusOK, "")
	waitSettings(t, n, "mu", 2, settingsStats{SyncDisk: 2500})

	// youzan's limits themselves are accepted, one past them is not.
	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=mu&syncdisk=4000&retention=60", "", http.StatusOK, "")
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"topic=mu&syncdisk=4001", http.StatusBadRequest, "INVALID_ARG_TOPIC_SYNC_DISK"},
		{"topic=mu&syncdisk=-1", http.StatusBadRequest, "INVALID_ARG_TOPIC_SYNC_DISK"},
		{"topic=mu&retention=61", http.StatusBadRequest, "INVALID_ARG_TOPIC_RETENTION"},
		{"topic=mu&replicator=3", http.StatusBadRequest, "invalid replica move: 3 replicas, 1 live nodes"},
		{"topic=mu&replicator=x", http.StatusBadRequest, "INVALID_ARG_TOPIC_REPLICATOR"},
		{"topic=missing&syncdisk=1", http.StatusNotFound, "TOPIC_NOT_FOUND"},
		{"syncdisk=1", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
	} {
		expectV1(t, n, http.MethodPost, "/topic/meta/update?"+tc.query, "", tc.status, errBody(tc.code))
	}
	waitSettings(t, n, "mu", 2, settingsStats{SyncDisk: 4000, RetentionDays: 60})
}

// A topic's retention deletes its own confirmed segments older than that
// many days and no other topic's; /topic/meta/update gives a running
// topic one. Segment ages are set on disk: retention reads them there.
func TestTopicRetentionDaysDeletesOnlyThatTopicsSegments(t *testing.T) {
	n := testnode.Start(t, "--max-bytes-per-file", "200", "--retention-check-interval", "20ms", "--channel-persist-interval", "20ms")
	mustPost(t, n, "/topic/create?topic=short&retention=2", "", "")
	mustPost(t, n, "/topic/create?topic=kept", "", "")
	for _, topic := range []string{"short", "kept"} {
		mustPost(t, n, "/channel/create?topic="+topic+"&channel=c", "", "")
		for i := range 20 {
			mustPost(t, n, "/pub?topic="+topic, fmt.Sprintf("m%02d", i), "OK")
		}
		c := subscribe(t, n, topic, "c", map[string]any{}, 20)
		for range 20 {
			c.send(nsq.Finish(c.message().ID))
		}
		dir := filepath.Join(n.DataPath, "topics", topic, "0")
		var saved storage.ChannelState
		eventually(t, topic+"'s channel state saved at 20", func() bool {
			st, ok, err := storage.LoadChannelState(dir, "c")
			saved = st
			return err == nil && ok && st.ConfirmedCount == 20
		}, func() any { return saved })
		ageSegments(t, dir, 3*24*time.Hour)
	}
	first := func(topic string) int {
		return call(t, n, http.MethodGet, "/message/get?topic="+topic+"&partition=0&search_mode=count&search_pos=0", "").status
	}
	eventually(t, "short's first segment deleted", func() bool { return first("short") == http.StatusNotFound },
		func() any { return first("short") })
	if got := first("kept"); got != http.StatusOK {
		t.Fatalf("kept's first message: %d, want 200: it has no retention", got)
	}

	mustPost(t, n, "/topic/meta/update?topic=kept&retention=1", "", "")
	eventually(t, "kept's first segment deleted", func() bool { return first("kept") == http.StatusNotFound },
		func() any { return first("kept") })
}

// ageSegments sets the modification time of a partition's segment files
// age in the past.
func ageSegments(t testing.TB, dir string, age time.Duration) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, strings.Repeat("[0-9]", 20)+".log"))
	if err != nil || len(names) < 2 {
		t.Fatalf("segments in %s: %v %v, want several", dir, names, err)
	}
	old := time.Now().Add(-age)
	for _, name := range names {
		if err := os.Chtimes(name, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// A topic's syncdisk is the partition's fsync count, in place of
// --sync-every; changed by /topic/meta/update, it applies from the next
// publish. --sync-timeout is long so no time-driven sync adds to the
// count (partita_partition_fsyncs_total).
func TestTopicSyncDiskSetsFsyncCount(t *testing.T) {
	n := testnode.Start(t, "--sync-timeout", "1h")
	mustPost(t, n, "/topic/create?topic=every&syncdisk=1", "", "")
	mustPost(t, n, "/topic/create?topic=rare", "", "")
	fsyncs := func(topic string) float64 {
		v, _ := sample(scrape(t, n), "partita_partition_fsyncs_total", map[string]string{"topic": topic, "partition": "0"})
		return v
	}
	publish := func(topic string, count int) float64 {
		before := fsyncs(topic)
		for range count {
			mustPost(t, n, "/pub?topic="+topic, "x", "OK")
		}
		return fsyncs(topic) - before
	}
	if got := publish("every", 10); got != 10 {
		t.Fatalf("%v fsyncs for 10 publishes at syncdisk=1, want 10", got)
	}
	if got := publish("rare", 10); got != 0 {
		t.Fatalf("%v fsyncs for 10 publishes at --sync-every 2500, want 0", got)
	}
	mustPost(t, n, "/topic/meta/update?topic=rare&syncdisk=2", "", "")
	waitSettings(t, n, "rare", 1, settingsStats{SyncDisk: 2})
	// The 10 commits waiting are synced with the first one after the change
	// (its own fsync: more than twice the count wait), then each second
	// commit asks the node's syncfs, or fsyncs itself when the fourth comes
	// first: one sync for every two to four commits.
	if got := publish("rare", 10); got < 3 || got > 5 {
		t.Fatalf("%v syncs for 10 publishes after syncdisk=2, want 3 to 5", got)
	}
}

// A topic created with disable_channel_auto_create refuses SUB and
// SUB_ADVANCED to a channel /channel/create did not make, with youzan's
// fatal E_SUB_CHANNEL_NOT_REGISTERED, and makes no channel; once created
// the channel is subscribed as any other. Turned off by
// /topic/meta/update, SUB creates channels again.
func TestDisableChannelAutoCreateRefusesSub(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=dc&disable_channel_auto_create=true", "", "")
	mustPost(t, n, "/pub?topic=dc", "hello", "OK")
	refused := func(cmd *nsq.Command) {
		t.Helper()
		c := dial(t, n, map[string]any{})
		c.send(cmd)
		typ, data := c.frame()
		if typ != nsq.FrameTypeError || !strings.HasPrefix(string(data), "E_SUB_CHANNEL_NOT_REGISTERED ") {
			t.Fatalf("%s: frame %d %q, want E_SUB_CHANNEL_NOT_REGISTERED", cmd.Name, typ, data)
		}
		c.conn.SetReadDeadline(time.Now().Add(waitFor))
		if _, err := c.r.ReadByte(); err == nil {
			t.Fatalf("%s: the connection stayed open after a fatal error", cmd.Name)
		}
	}
	refused(nsq.Subscribe("dc", "billing"))
	refused(&nsq.Command{Name: []byte("SUB_ADVANCED"), Params: [][]byte{[]byte("dc"), []byte("billing"), []byte("0"), []byte("msgcount:0")}})
	var chans struct {
		Channels []string `json:"channels"`
	}
	getJSON(t, n, "/channels?topic=dc", &chans)
	if len(chans.Channels) != 0 {
		t.Fatalf("a refused SUB made channels %v", chans.Channels)
	}

	mustPost(t, n, "/channel/create?topic=dc&channel=billing", "", "")
	c := subscribe(t, n, "dc", "billing", map[string]any{}, 1)
	if m := c.message(); string(m.Body) != "hello" {
		t.Fatalf("got %q, want hello", m.Body)
	}

	mustPost(t, n, "/topic/meta/update?topic=dc&disable_channel_auto_create=false", "", "")
	waitSettings(t, n, "dc", 1, settingsStats{SyncDisk: 2500})
	subscribe(t, n, "dc", "audit", map[string]any{}, 1)
	getJSON(t, n, "/channels?topic=dc", &chans)
	if fmt.Sprint(chans.Channels) != "[audit billing]" {
		t.Fatalf("channels %v, want [audit billing]", chans.Channels)
	}
}

// youzan's /listlookup answers in its nsqlookupd's shape: every node that
// answers the lookup API (here the one) with its address and ports as
// strings, and the leader, the elected controller, with the revision of
// its election as its epoch.
func TestListLookup(t *testing.T) {
	n := testnode.Start(t, "--node-id", "solo", "--broadcast-address", "mq.example.internal")
	type node struct {
		ID       string
		NodeIP   string
		TcpPort  string
		HttpPort string
		RpcPort  string
		Epoch    int64
	}
	var doc struct {
		Nodes  []node `json:"lookupdnodes"`
		Leader node   `json:"lookupdleader"`
	}
	eventually(t, "a controller elected", func() bool {
		a := call(t, n, http.MethodGet, "/listlookup", "")
		if a.status != http.StatusOK || a.header.Get("X-NSQ-Content-Type") != v1Header {
			t.Fatalf("/listlookup: %d %q %s", a.status, a.header.Get("X-NSQ-Content-Type"), a.body)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(a.body), &keys); err != nil || len(keys) != 2 || keys["lookupdnodes"] == nil || keys["lookupdleader"] == nil {
			t.Fatalf("/listlookup keys %v (%v), want lookupdnodes and lookupdleader", keys, err)
		}
		if err := json.Unmarshal([]byte(a.body), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Leader.ID != ""
	}, func() any { return doc })
	want := node{ID: "solo", NodeIP: "mq.example.internal", TcpPort: strconv.Itoa(port(t, n.TCPAddr())),
		HttpPort: strconv.Itoa(port(t, n.HTTPAddr())), RpcPort: strconv.Itoa(port(t, n.Args[slices.Index(n.Args, "--cluster-address")+1]))}
	if doc.Leader.Epoch <= 0 {
		t.Fatalf("leader epoch %d, want the election's revision", doc.Leader.Epoch)
	}
	want.Epoch = doc.Leader.Epoch
	if doc.Leader != want {
		t.Fatalf("lookupdleader %+v, want %+v", doc.Leader, want)
	}
	if len(doc.Nodes) != 1 || doc.Nodes[0] != want {
		t.Fatalf("lookupdnodes %+v, want [%+v]", doc.Nodes, want)
	}
	if v, ok := sample(scrape(t, n), "partita_controller", map[string]string{"node": "solo"}); !ok || v != 1 {
		t.Fatalf("partita_controller %v (%v), want 1 for the leader /listlookup names", v, ok)
	}
}

// upgradeext makes a running topic an ext topic, as youzan's
// /topic/meta/update does: /lookup's meta then says extend_support, which
// makes youzan's go-nsq decode message headers; nothing turns it back.
func TestTopicMetaUpdateUpgradesToExt(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=ux&partition_num=1", "", "")
	if meta := lookupMeta(t, n, "ux"); meta["extend_support"] != false {
		t.Fatalf("/lookup meta of a new plain topic: %v", meta)
	}
	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=ux&upgradeext=true", "", http.StatusOK, "")
	eventually(t, "the topic to be ext", func() bool { return lookupMeta(t, n, "ux")["extend_support"] == true }, func() any { return lookupMeta(t, n, "ux") })
	expectV1(t, n, http.MethodPost, "/topic/meta/update?topic=ux&upgradeext=false&syncdisk=3", "", http.StatusOK, "")
	waitSettings(t, n, "ux", 1, settingsStats{SyncDisk: 3})
	if meta := lookupMeta(t, n, "ux"); meta["extend_support"] != true {
		t.Fatalf("/lookup meta after upgradeext=false: %v, want still ext", meta)
	}
}
