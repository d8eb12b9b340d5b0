package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
)

// youzan's per-topic settings, as nsqlookupd's /topic/create and
// /topic/meta/update take them: syncdisk (commits between fsyncs),
// retention (days) and disable_channel_auto_create; and Partita's own
// dedupe_window, a Go duration ("2m", "0" for the node's flag).

// createSettings reads the settings /topic/create may carry; absent ones
// are 0, the node's flags. It answers the request itself when one is not
// a count.
func createSettings(w http.ResponseWriter, r *http.Request) (broker.Settings, bool) {
	var s broker.Settings
	var ok bool
	if s.SyncEvery, ok = countParam(w, r, "syncdisk", "INVALID_ARG_TOPIC_SYNC_DISK", -1); !ok {
		return s, false
	}
	if s.RetentionDays, ok = countParam(w, r, "retention", "INVALID_ARG_TOPIC_RETENTION", -1); !ok {
		return s, false
	}
	s.DisableChannelAutoCreate = r.URL.Query().Get("disable_channel_auto_create") == "true"
	if s.DedupeWindow, ok = dedupeWindowParam(w, r); !ok {
		return s, false
	}
	return s, true
}

// dedupeWindowParam reads dedupe_window; absent is 0. A bad value is
// answered 400 INVALID_ARG_TOPIC_DEDUPE_WINDOW.
func dedupeWindowParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	v := r.URL.Query().Get("dedupe_window")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || broker.ValidDedupeWindow(d) != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPIC_DEDUPE_WINDOW")
		return 0, false
	}
	return d, true
}

// countParam reads a whole number of at least 0 and at most max (no bound
// when max < 0); absent is 0. A bad value is answered 400 code.
func countParam(w http.ResponseWriter, r *http.Request, name, code string, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || max >= 0 && n > max {
		writeError(w, http.StatusBadRequest, code)
		return 0, false
	}
	return n, true
}

// topicMetaUpdate is youzan's /topic/meta/update?topic=T with any of
// syncdisk, retention, disable_channel_auto_create=true|false and
// dedupe_window; what is
// absent stays. The change is stored in etcd, and every node holding a
// partition of the topic applies it when its metadata watch brings it,
// usually within milliseconds. Another replicator moves every partition
// to that many replicas, as replica moves do.
func (s *Server) topicMetaUpdate(w http.ResponseWriter, r *http.Request) {
	name, ok := topicParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var change broker.SettingsChange
	optional := func(param, code string, max int, into **int) bool {
		if !q.Has(param) {
			return true
		}
		n, ok := countParam(w, r, param, code, max)
		*into = &n
		return ok
	}
	if !optional("syncdisk", "INVALID_ARG_TOPIC_SYNC_DISK", broker.MaxSyncEvery, &change.SyncEvery) ||
		!optional("retention", "INVALID_ARG_TOPIC_RETENTION", broker.MaxRetentionDays, &change.RetentionDays) ||
		!optional("replicator", "INVALID_ARG_TOPIC_REPLICATOR", -1, &change.Replicas) {
		return
	}
	// youzan changes the flag for exactly "true" or "false".
	switch q.Get("disable_channel_auto_create") {
	case "true":
		change.DisableChannelAutoCreate = new(true)
	case "false":
		change.DisableChannelAutoCreate = new(false)
	}
	if q.Has("dedupe_window") {
		d, ok := dedupeWindowParam(w, r)
		if !ok {
			return
		}
		change.DedupeWindow = &d
	}
	change.UpgradeExt = q.Get("upgradeext") == "true"
	if _, err := s.Broker.UpdateSettings(r.Context(), name, change); err != nil {
		if errors.Is(err, broker.ErrReplicasChange) {
			writeError(w, http.StatusBadRequest, "REPLICATOR_CHANGE_NOT_SUPPORTED")
			return
		}
		if errors.Is(err, cluster.ErrBadMove) || errors.Is(err, cluster.ErrMoveInProgress) {
			writeMoveError(w, err)
			return
		}
		writeBrokerError(w, err)
		return
	}
	writeOK(w, nil)
}
